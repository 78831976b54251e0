//! The communicators given to the caller: opaque handles (never dereferenced) looked up in a
//! process-wide table, so a stale or foreign handle is `HCCL_E_PARA`, not a crash.

use crate::errmsg::{fail, Fail};
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::HcclRootInfo;
use braid_stream_core::collective::CollectiveCall;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// One rank's communicator.
struct Comm {
    rank: u32,
    ranks: u32,
}

struct Table {
    comms: HashMap<usize, Comm>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            Mutex::new(Table {
                comms: HashMap::new(),
            })
        })
        .lock()
        // Every operation leaves the table consistent.
        .unwrap_or_else(|p| p.into_inner())
}

fn not_built(call: &str) -> Fail {
    fail(
        HCCL_E_NOT_SUPPORT,
        format!("{call}: communicators need the simulated node's collectives"),
    )
}

/// A fresh root info for a communicator whose rank 0 is the current device.
pub(super) fn root_info(call: &str) -> Result<HcclRootInfo, Fail> {
    Err(not_built(call))
}

/// Joins the communicator `info` describes as `rank` of `ranks`.
pub(super) fn init_root_info(
    call: &str,
    ranks: u32,
    rank: u32,
    info: &HcclRootInfo,
) -> Result<usize, Fail> {
    let _ = (ranks, rank, info);
    Err(not_built(call))
}

/// One communicator per device id (rank i on `devices[i]`).
pub(super) fn init_all(call: &str, devices: &[i32]) -> Result<Vec<usize>, Fail> {
    let _ = devices;
    Err(not_built(call))
}

fn invalid(call: &str, handle: usize) -> Fail {
    fail(
        HCCL_E_PARA,
        format!("{call}: {handle:#x} is not a live communicator"),
    )
}

/// Destroys a communicator.
pub(super) fn destroy(call: &str, handle: usize) -> Result<(), Fail> {
    table()
        .comms
        .remove(&handle)
        .map(drop)
        .ok_or_else(|| invalid(call, handle))
}

/// A communicator's rank and size.
pub(super) fn rank_and_size(call: &str, handle: usize) -> Result<(u32, u32), Fail> {
    table()
        .comms
        .get(&handle)
        .map(|c| (c.rank, c.ranks))
        .ok_or_else(|| invalid(call, handle))
}

/// Enqueues this rank's part of `collective` on the ACL stream `stream`.
pub(super) fn collective(
    call: &str,
    handle: usize,
    stream: usize,
    collective: &CollectiveCall,
) -> Result<(), Fail> {
    let _ = (stream, collective);
    rank_and_size(call, handle)?;
    Err(not_built(call))
}
