//! The ACL return codes and values the simulated runtime uses: `braid-acl-sys`'s declarations
//! (CANN's numbers), with the capture modes and statuses under the short names the registry
//! matches on.

pub(crate) use braid_acl_sys::acl::codes::*;
pub(crate) use braid_acl_sys::acl::*;
pub(crate) use braid_acl_sys::acl::{
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL as CAPTURE_MODE_GLOBAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED as CAPTURE_MODE_RELAXED,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL as CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE as CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE as CAPTURE_STATUS_NONE,
};
