//! The communicators given to the caller: opaque handles (never dereferenced) looked up in a
//! process-wide table, so a stale or foreign handle is `HCCL_E_PARA`, not a crash. Each is a
//! communicator of the simulator ([`SimComm`]) over devices of the node.
//!
//! Ranks of a root-info communicator join without waiting for each other (the simulator runs
//! a collective once every rank has joined and submitted its part).

use super::results::{from_acl, from_hal};
use crate::errmsg::{fail, guarded, Fail};
use crate::registry::with;
use braid_acl_sys::hccl::codes::*;
use braid_acl_sys::hccl::{HcclResult, HcclRootInfo};
use braid_backend_sim::{SimBackend, SimComm};
use braid_stream_core::collective::{CollectiveCall, RootInfo};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::sync::{GlobalMutex, GlobalMutexGuard};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// First communicator handle; handles step like pointers and never repeat.
const HANDLE_BASE: usize = 0x0cc1_0000;
const HANDLE_STEP: usize = 0x40;

/// One rank's communicator.
struct Comm {
    /// The device id it runs on.
    device: usize,
    rank: u32,
    ranks: u32,
    sim: SimComm,
}

struct Table {
    comms: HashMap<usize, Comm>,
    next: usize,
}

fn table() -> GlobalMutexGuard<'static, Table> {
    static TABLE: OnceLock<GlobalMutex<Table>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            GlobalMutex::new(Table {
                comms: HashMap::new(),
                next: HANDLE_BASE,
            })
        })
        .lock()
}

/// Keeps `comm` and gives its handle.
fn insert(comm: Comm) -> usize {
    let mut t = table();
    let handle = t.next;
    t.next += HANDLE_STEP;
    t.comms.insert(handle, comm);
    handle
}

/// A fresh root info for a communicator whose rank 0 is the current device.
pub(super) fn root_info(call: &str) -> Result<HcclRootInfo, Fail> {
    let (_, device) = with(|r| r.current_sim_device(call)).map_err(from_acl)?;
    let info =
        guarded(|| SimComm::root_info(&device).map_err(|e| from_hal(call, e))).map_err(from_acl)?;
    Ok(HcclRootInfo { internal: *info.0 })
}

/// Joins the communicator `info` describes as `rank` of `ranks` on the current device.
pub(super) fn init_root_info(
    call: &str,
    ranks: u32,
    rank: u32,
    info: &HcclRootInfo,
) -> Result<usize, Fail> {
    let (index, device) = with(|r| r.current_sim_device(call)).map_err(from_acl)?;
    let info = RootInfo(Box::new(info.internal));
    let sim = guarded(|| {
        SimComm::init_root_info(&device, ranks, rank, &info).map_err(|e| from_hal(call, e))
    })
    .map_err(from_acl)?;
    Ok(insert(Comm {
        device: index,
        rank,
        ranks,
        sim,
    }))
}

/// One communicator per device id (rank i on `devices[i]`).
pub(super) fn init_all(call: &str, devices: &[i32]) -> Result<Vec<usize>, Fail> {
    let mut seen = HashSet::new();
    if let Some(twice) = devices.iter().find(|d| !seen.insert(**d)) {
        return Err(fail(
            HCCL_E_PARA,
            format!("{call}: device {twice} is listed twice"),
        ));
    }
    let sims = with(|r| {
        r.check_one_mode(call, devices)?;
        devices
            .iter()
            .map(|&id| r.comm_device(call, id))
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(from_acl)?;
    let refs: Vec<_> = sims.iter().collect();
    let comms =
        guarded(|| SimComm::init_all(&refs).map_err(|e| from_hal(call, e))).map_err(from_acl)?;
    let ranks = devices.len() as u32;
    Ok(comms
        .into_iter()
        .zip(devices)
        .zip(0..)
        .map(|((sim, &id), rank)| {
            insert(Comm {
                device: id as usize,
                rank,
                ranks,
                sim,
            })
        })
        .collect())
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

/// The communicator's asynchronous error as an `HcclResult` (`HCCL_SUCCESS` when none): the
/// result its failure maps to (`from_hal`).
pub(super) fn async_error(call: &str, handle: usize) -> Result<HcclResult, Fail> {
    let sim = table()
        .comms
        .get(&handle)
        .map(|c| c.sim.clone())
        .ok_or_else(|| invalid(call, handle))?;
    Ok(sim
        .async_error()
        .map_or(HCCL_SUCCESS, |e| from_hal(call, e).code))
}

/// The caller's handle of sub-communicator `sub_id` of communicator `handle`, made of its
/// ranks `ranks`, as sub-rank `sub_rank` (the simulator refuses a bad list as
/// `HCCL_E_PARA`).
pub(super) fn create_sub_comm(
    call: &str,
    handle: usize,
    ranks: &[u32],
    sub_id: u64,
    sub_rank: u32,
) -> Result<usize, Fail> {
    let (device, parent) = table()
        .comms
        .get(&handle)
        .map(|c| (c.device, c.sim.clone()))
        .ok_or_else(|| invalid(call, handle))?;
    let sim = guarded(|| {
        parent
            .create_sub_comm(ranks, sub_id, sub_rank)
            .map_err(|e| from_hal(call, e))
    })
    .map_err(from_acl)?;
    Ok(insert(Comm {
        device,
        rank: sub_rank,
        ranks: ranks.len() as u32,
        sim,
    }))
}

/// Enqueues this rank's part of `collective` on the ACL stream `stream`.
pub(super) fn collective(
    call: &'static str,
    handle: usize,
    stream: usize,
    collective: &CollectiveCall,
) -> Result<(), Fail> {
    let (device, sim) = table()
        .comms
        .get(&handle)
        .map(|c| (c.device, c.sim.clone()))
        .ok_or_else(|| invalid(call, handle))?;
    with(|r| {
        r.enqueue_collective(call, stream, device, |s| {
            SimBackend::launch_collective(s, &sim, collective, call)
        })
    })
    .map_err(from_acl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hccl::exports::HcclGetCommAsyncError;
    use braid_acl_sys::hccl::HcclComm;
    use braid_backend_sim::{FaultPlan, NodeConfig, SimNode};
    use braid_stream_core::collective::{CollectiveOp, ReduceOp};
    use braid_stream_core::dtype::DType;
    use braid_stream_core::hal::{Device as _, Stream as _};

    /// `HcclGetCommAsyncError`'s answer for `handle`.
    fn async_error(handle: usize) -> HcclResult {
        let mut found = -1;
        // SAFETY: `found` is valid for a write.
        let code = unsafe { HcclGetCommAsyncError(handle as HcclComm, &mut found) };
        assert_eq!(code, HCCL_SUCCESS);
        found
    }

    // Fault plans are the simulator's (no environment variable sets one): the communicators
    // are made on a node of this test's own and put in the table as the exports make them.
    #[test]
    fn hccl_get_comm_async_error_reports_a_part_that_failed_on_the_device() {
        let node = SimNode::new(NodeConfig::new(2));
        let devs = node.devices();
        devs[0].set_fault_plan(&FaultPlan::new().fail_collective_async_nth(1));
        let sims = SimComm::init_all(&[&devs[0], &devs[1]]).unwrap();
        let parts: Vec<_> = devs
            .iter()
            .zip(&sims)
            .map(|(d, sim)| {
                let x = d.alloc(4).unwrap();
                let call = CollectiveCall {
                    op: CollectiveOp::AllReduce(ReduceOp::Sum),
                    send: x,
                    recv: x,
                    count: 1,
                    dtype: DType::F32,
                    v: None,
                };
                (d.create_stream(0).unwrap(), sim.clone(), call)
            })
            .collect();
        let handles: Vec<usize> = sims
            .into_iter()
            .zip(0..)
            .map(|(sim, rank)| {
                insert(Comm {
                    device: rank as usize,
                    rank,
                    ranks: 2,
                    sim,
                })
            })
            .collect();
        assert_eq!(async_error(handles[0]), HCCL_SUCCESS);
        for (s, sim, call) in &parts {
            SimBackend::launch_collective(s, sim, call, "HcclAllReduce").unwrap();
        }
        // Every rank's handle reports it, before any synchronize and after.
        for &h in &handles {
            assert_eq!(async_error(h), HCCL_E_RUNTIME);
        }
        assert!(parts[0].0.synchronize().is_err());
        for &h in &handles {
            assert_eq!(async_error(h), HCCL_E_RUNTIME, "kept");
            destroy("HcclCommDestroy", h).unwrap();
        }
    }
}
