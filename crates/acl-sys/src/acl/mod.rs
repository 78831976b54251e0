//! The ACL runtime (`libascendcl.so`): types, flags, return codes and their names, and the
//! [`AclFunctions`] table of every function braid uses ([`fns`] has their pointer types);
//! [`client`] and [`op`] declare what foreign CANN clients (torch_npu) bind beyond it.
//!
//! Names are CANN's (`aclrtStream`, `ACL_EVENT_SYNC`, `aclrtMalloc`), so the C documentation
//! reads directly onto them.

pub mod client;
mod client_types;
pub mod codes;
mod functions;
pub mod op;
mod sharing;
mod types;

pub use client::AclClientFunctions;
pub use client_types::*;
pub use codes::{code_name, CODE_NAMES, UNKNOWN_CODE_NAME};
pub use functions::{fns, AclFunctions};
pub use op::AclOpFunctions;
pub use sharing::*;
pub use types::*;

/// Environment variable naming the ACL library file to load, tried first.
pub const LIB_ENV: &str = "BRAID_ACL_LIB";

/// ACL's library file name (under `lib64/` of a CANN install, or on the loader path).
pub const LIB_NAME: &str = "libascendcl.so";
