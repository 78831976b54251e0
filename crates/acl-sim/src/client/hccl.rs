//! The exported HCCL functions of [`HcclClientFunctions`], on braid-acl-sim's HCCL
//! ([`crate::hccl`]).
//!
//! [`HcclClientFunctions`]: braid_acl_sys::hccl::HcclClientFunctions

use crate::hccl::exports::HcclCommInitRootInfo;
use braid_acl_sys::hccl::{HcclComm, HcclResult, HcclRootInfo};
use std::ffi::c_void;

/// `HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo,
/// uint32_t rank, const HcclCommConfig *config, HcclComm *comm)`: as
/// `HcclCommInitRootInfo`; the options of `config` (buffer size, name, expansion mode,
/// algorithm, ...) tune HCCL's own transport and are not read: the simulator's collectives
/// are the same whatever they say.
///
/// # Safety
/// As `HcclCommInitRootInfo`; `config` is not read.
#[no_mangle]
pub unsafe extern "C" fn HcclCommInitRootInfoConfig(
    n_ranks: u32,
    root_info: *const HcclRootInfo,
    rank: u32,
    _config: *const c_void,
    comm: *mut HcclComm,
) -> HcclResult {
    // SAFETY: the caller's guarantees, forwarded.
    unsafe { HcclCommInitRootInfo(n_ranks, root_info, rank, comm) }
}

braid_acl_sys::hccl_client_functions!(
    braid_acl_sys::check_exports!(braid_acl_sys::hccl::client_fns;)
);
