//! The C declarations of the ACL API braid uses (re-exported from `braid-acl-sys`, where they
//! are written once for this backend and for `braid-acl-sim`).

pub use braid_acl_sys::acl::*;
