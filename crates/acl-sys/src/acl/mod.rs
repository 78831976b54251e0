//! The ACL runtime (`libascendcl.so`): types, flags, return codes and their names, and the
//! [`AclFunctions`] table of every function braid uses ([`fns`] has their pointer types).
//!
//! Names are CANN's (`aclrtStream`, `ACL_EVENT_SYNC`, `aclrtMalloc`), so the C documentation
//! reads directly onto them.

pub mod codes;
mod functions;
mod sharing;
mod types;

pub use codes::{code_name, CODE_NAMES, UNKNOWN_CODE_NAME};
pub use functions::{fns, AclFunctions};
pub use sharing::*;
pub use types::*;

/// Environment variable naming the ACL library file to load, tried first.
pub const LIB_ENV: &str = "BRAID_ACL_LIB";

/// ACL's library file name (under `lib64/` of a CANN install, or on the loader path).
pub const LIB_NAME: &str = "libascendcl.so";
