//! Sharing with other processes, with CANN's rules: IPC memory by key
//! (`aclrtIpcMemGetExportKey`, `aclrtIpcMemSetImportPid`, `aclrtIpcMemImportByKey`,
//! `aclrtIpcMemClose`), physical memory by shareable handle
//! (`aclrtMemExportToShareableHandle`, `aclrtMemSetPidToShareableHandle`,
//! `aclrtMemImportFromShareableHandle`), IPC events (`aclrtCreateEventExWithFlag` with
//! `ACL_EVENT_IPC`, `aclrtIpcGetEventHandle`, `aclrtIpcOpenEventHandle`) and the process id
//! the allow-lists take (`aclrtDeviceGetBareTgid`).
//!
//! The simulator shares the bytes and records between processes
//! (`braid_backend_sim::ipc`: files in `/dev/shm`); this room adds ACL's argument checks and
//! codes: a key buffer of at least 65 bytes, flags 0 or 1, `ACL_EVENT_IPC` alone, a shareable
//! handle once per physical handle, memory imported released by `aclrtIpcMemClose` (not
//! `aclrtFree`). Refusals the simulator makes (a closed or foreign key, a process not on the
//! allow-list, an IPC event in a capture) are `ACL_ERROR_RT_PARAM_INVALID` (107000) with its
//! text naming the fix. The import flag `ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS` is
//! accepted and has no effect: the memory is mapped onto the importing device itself.

use super::{sim_fail, EventEntry, Physical, Recorded, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_stream_core::hal::Device as _;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use std::collections::HashMap;

/// Who holds each key of this process: exports and imports, by key.
#[derive(Default)]
pub(super) struct IpcRoom {
    /// Memory exported: key → device.
    exports: HashMap<String, usize>,
    /// Memory imported: key → (device, address).
    imports: HashMap<String, (usize, u64)>,
}

fn flag(call: &str, what: &str, flags: u64) -> Result<bool, Fail> {
    match flags {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: {what} must be 0 or 1, got {other:#x}"),
        )),
    }
}

impl Registry {
    /// `aclrtDeviceGetBareTgid`: this process's id.
    pub fn bare_tgid(&self) -> Result<i32, Fail> {
        i32::try_from(std::process::id()).map_err(|_| {
            fail(
                ACL_ERROR_RT_PARAM_INVALID,
                "aclrtDeviceGetBareTgid: the process id does not fit",
            )
        })
    }

    /// `aclrtIpcMemGetExportKey`: shares `size` bytes at `ptr` (inside one allocation of the
    /// current device); the key.
    pub fn ipc_export(&mut self, ptr: u64, size: usize, flags: u64) -> Result<String, Fail> {
        const CALL: &str = "aclrtIpcMemGetExportKey";
        let device = self.current(CALL)?;
        let disable_pid_check = flag(CALL, "flags", flags)?;
        if size == 0 || !self.is_device(device, ptr, size as u64) {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: {size} bytes at {ptr:#x} are not memory of device {device} from aclrtMalloc"),
            ));
        }
        let range = DeviceSlice::new(DevicePtr(ptr), size as u64);
        let key = self
            .dev(device)?
            .sim
            .ipc_export(range, !disable_pid_check)
            .map_err(|e| sim_fail(CALL, e))?;
        self.ipc.exports.insert(key.clone(), device);
        Ok(key)
    }

    /// `aclrtIpcMemSetImportPid`.
    pub fn ipc_set_import_pid(&mut self, key: &str, pids: &[i32]) -> Result<(), Fail> {
        const CALL: &str = "aclrtIpcMemSetImportPid";
        let Some(&device) = self.ipc.exports.get(key) else {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: {key:?} is not a key this process exported"),
            ));
        };
        self.dev(device)?
            .sim
            .ipc_allow_pids(key, pids)
            .map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtIpcMemImportByKey`: maps the memory of `key` onto the current device.
    pub fn ipc_import(&mut self, key: &str, flags: u64) -> Result<u64, Fail> {
        const CALL: &str = "aclrtIpcMemImportByKey";
        let device = self.current(CALL)?;
        flag(CALL, "flags", flags)?;
        let (ptr, size) = self
            .dev(device)?
            .sim
            .ipc_import(key)
            .map_err(|e| sim_fail(CALL, e))?;
        let size = size.unwrap_or(0);
        self.dev_mut(device)?.allocations.insert(ptr.0, size);
        self.ipc.imports.insert(key.to_string(), (device, ptr.0));
        Ok(ptr.0)
    }

    /// `aclrtIpcMemClose`: an import is unmapped; an export takes no new import.
    pub fn ipc_close(&mut self, key: &str) -> Result<(), Fail> {
        const CALL: &str = "aclrtIpcMemClose";
        let device = match (self.ipc.imports.get(key), self.ipc.exports.get(key)) {
            (Some(&(device, ptr)), _) => {
                self.dev_mut(device)?.allocations.remove(&ptr);
                self.ipc.imports.remove(key);
                device
            }
            (None, Some(&device)) => {
                self.ipc.exports.remove(key);
                device
            }
            (None, None) => {
                return Err(fail(
                    ACL_ERROR_RT_PARAM_INVALID,
                    format!("{CALL}: {key:?} is neither exported nor imported by this process (closed already?)"),
                ))
            }
        };
        // SAFETY: an import's memory is unmapped only after the caller is done with it
        // (ACL's contract); the simulator stays memory safe for work still queued on it.
        unsafe { self.dev(device)?.sim.ipc_close(key) }.map_err(|e| sim_fail(CALL, e))
    }

    /// Whether `ptr` of `device` is memory imported from another process.
    pub(super) fn is_ipc_import(&self, device: usize, ptr: u64) -> bool {
        self.ipc
            .imports
            .values()
            .any(|&(d, p)| d == device && p == ptr)
    }

    /// `aclrtMemExportToShareableHandle`: the shareable handle of physical memory `handle`.
    pub fn export_shareable(
        &mut self,
        handle: usize,
        handle_type: u32,
        flags: u64,
    ) -> Result<u64, Fail> {
        const CALL: &str = "aclrtMemExportToShareableHandle";
        if handle_type != ACL_MEM_HANDLE_TYPE_NONE {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: handleType is reserved and must be ACL_MEM_HANDLE_TYPE_NONE, got {handle_type}"),
            ));
        }
        let disable_pid_check = flag(CALL, "flags", flags)?;
        let (device, sim) = {
            let p = self.physical_entry(CALL, handle)?;
            (p.device, p.sim)
        };
        self.dev(device)?
            .sim
            .export_physical(sim, !disable_pid_check)
            .map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtMemSetPidToShareableHandle`.
    pub fn set_pid_to_shareable(&mut self, shareable: u64, pids: &[i32]) -> Result<(), Fail> {
        const CALL: &str = "aclrtMemSetPidToShareableHandle";
        let device = self.current(CALL)?;
        self.dev(device)?
            .sim
            .allow_physical(shareable, pids)
            .map_err(|e| sim_fail(CALL, e))
    }

    /// `aclrtMemImportFromShareableHandle`: a physical handle of `device_id` whose bytes are
    /// the exporter's.
    pub fn import_shareable(&mut self, shareable: u64, device_id: i32) -> Result<usize, Fail> {
        const CALL: &str = "aclrtMemImportFromShareableHandle";
        let device = self.device_index(device_id)?;
        let (sim, size) = self
            .dev(device)?
            .sim
            .import_physical(shareable)
            .map_err(|e| sim_fail(CALL, e))?;
        let handle = self.handle();
        self.physical
            .insert(handle, Physical::new(device, sim, size));
        Ok(handle)
    }

    /// `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`: an event other processes may wait on.
    pub(super) fn create_ipc_event(&mut self, device: usize, flags: u32) -> Result<usize, Fail> {
        const CALL: &str = "aclrtCreateEventExWithFlag";
        if flags != ACL_EVENT_IPC {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "{CALL}: ACL_EVENT_IPC cannot be combined with other flags (got {flags:#x})"
                ),
            ));
        }
        let sim = self
            .dev(device)?
            .sim
            .create_ipc_event()
            .map_err(|e| sim_fail(CALL, e))?;
        let h = self.handle();
        self.events.insert(
            h,
            EventEntry {
                device,
                sim,
                flags,
                recorded: Recorded::Never,
            },
        );
        Ok(h)
    }

    /// `aclrtIpcGetEventHandle`.
    pub fn ipc_event_handle(&self, event: usize) -> Result<[u8; 64], Fail> {
        const CALL: &str = "aclrtIpcGetEventHandle";
        let e = self.event(CALL, event)?;
        if e.flags & ACL_EVENT_IPC == 0 {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("{CALL}: the event was not created with ACL_EVENT_IPC (aclrtCreateEventExWithFlag)"),
            ));
        }
        self.dev(e.device)?
            .sim
            .ipc_event_handle(&e.sim)
            .map_err(|err| sim_fail(CALL, err))
    }

    /// `aclrtIpcOpenEventHandle`: another process's event, on the current device.
    pub fn ipc_open_event(&mut self, handle: &[u8; 64]) -> Result<usize, Fail> {
        const CALL: &str = "aclrtIpcOpenEventHandle";
        let device = self.current(CALL)?;
        let sim = self
            .dev(device)?
            .sim
            .open_ipc_event(handle)
            .map_err(|e| sim_fail(CALL, e))?;
        let h = self.handle();
        self.events.insert(
            h,
            EventEntry {
                device,
                sim,
                flags: ACL_EVENT_IPC,
                recorded: Recorded::Never,
            },
        );
        Ok(h)
    }
}
