//! Sharing with other processes over ACL: the hal's IPC calls (`aclrtIpcMemGetExportKey`,
//! `aclrtIpcMemSetImportPid`, `aclrtIpcMemImportByKey`, `aclrtIpcMemClose`,
//! `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`, `aclrtIpcGetEventHandle`,
//! `aclrtIpcOpenEventHandle`, `aclrtDeviceGetBareTgid`) and, for the virtual-memory API,
//! physical memory shared by handle (`aclrtMemExportToShareableHandle`,
//! `aclrtMemSetPidToShareableHandle`, `aclrtMemImportFromShareableHandle`). Each symbol is
//! optional: a library without it is [`HalError::Unsupported`] naming it (the process id
//! falls back to the operating system's).

use crate::device::AclDevice;
use crate::event::AclEvent;
use crate::ffi::{
    ACL_EVENT_IPC, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT,
    ACL_RT_VMM_EXPORT_FLAG_DEFAULT, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};
use crate::live;
use crate::native::Ownership;
use braid_stream_core::hal::HalError;
use braid_stream_core::types::{DevicePtr, DeviceSlice};

fn missing(symbol: &'static str) -> HalError {
    HalError::Unsupported(symbol)
}

fn export_flags(allow_list: bool) -> u64 {
    if allow_list {
        ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT
    } else {
        ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    }
}

impl AclDevice {
    pub(crate) fn process_id_impl(&self) -> Result<i32, HalError> {
        let sh = &self.shared;
        match sh.calls.bare_tgid() {
            Some(r) => Ok(sh.result("aclrtDeviceGetBareTgid", r)?),
            None => i32::try_from(std::process::id())
                .map_err(|_| HalError::InvalidArgument("the process id does not fit".into())),
        }
    }

    pub(crate) fn ipc_export_impl(
        &self,
        range: DeviceSlice,
        allow_list: bool,
    ) -> Result<String, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let len = usize::try_from(range.len)
            .map_err(|_| HalError::InvalidArgument(format!("{} bytes do not fit", range.len)))?;
        let r = sh
            .calls
            .ipc_mem_get_export_key(range.ptr.0, len, export_flags(allow_list))
            .ok_or_else(|| {
                missing("IPC memory: this ACL library has no aclrtIpcMemGetExportKey")
            })?;
        Ok(sh.result("aclrtIpcMemGetExportKey", r)?)
    }

    pub(crate) fn ipc_allow_pids_impl(&self, key: &str, pids: &[i32]) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh.calls.ipc_mem_set_import_pid(key, pids).ok_or_else(|| {
            missing("IPC memory: this ACL library has no aclrtIpcMemSetImportPid")
        })?;
        Ok(sh.check("aclrtIpcMemSetImportPid", code)?)
    }

    pub(crate) fn ipc_import_impl(&self, key: &str) -> Result<DevicePtr, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let r = sh
            .calls
            .ipc_mem_import_by_key(key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT)
            .ok_or_else(|| missing("IPC memory: this ACL library has no aclrtIpcMemImportByKey"))?;
        Ok(DevicePtr(sh.result("aclrtIpcMemImportByKey", r)?))
    }

    pub(crate) fn ipc_close_impl(&self, key: &str) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .ipc_mem_close(key)
            .ok_or_else(|| missing("IPC memory: this ACL library has no aclrtIpcMemClose"))?;
        Ok(sh.check("aclrtIpcMemClose", code)?)
    }

    pub(crate) fn create_ipc_event_impl(&self) -> Result<AclEvent, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        // ACL_EVENT_IPC alone: CANN does not combine it with other flags.
        let r = sh
            .calls
            .create_event_ex_with_flag(ACL_EVENT_IPC)
            .ok_or_else(|| {
                missing("IPC events: this ACL library has no aclrtCreateEventExWithFlag")
            })?;
        let handle = sh.result("aclrtCreateEventExWithFlag", r)?;
        Ok(AclEvent::new(sh.clone(), handle))
    }

    pub(crate) fn ipc_event_handle_impl(&self, event: &AclEvent) -> Result<[u8; 64], HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let r = sh
            .calls
            .ipc_get_event_handle(event.raw)
            .ok_or_else(|| missing("IPC events: this ACL library has no aclrtIpcGetEventHandle"))?;
        Ok(sh.result("aclrtIpcGetEventHandle", r)?)
    }

    pub(crate) fn open_ipc_event_impl(&self, handle: &[u8; 64]) -> Result<AclEvent, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let r = sh.calls.ipc_open_event_handle(*handle).ok_or_else(|| {
            missing("IPC events: this ACL library has no aclrtIpcOpenEventHandle")
        })?;
        let raw = sh.result("aclrtIpcOpenEventHandle", r)?;
        // Recorded by its exporter, so always asked about; destroyed with this handle.
        Ok(AclEvent::foreign(sh.clone(), raw, Ownership::Owned))
    }

    /// Makes the physical memory mapped at `at` by `map_physical` shareable with other
    /// processes (`aclrtMemExportToShareableHandle`, once per mapping): the shareable handle
    /// to send them. With `allow_list`, only processes added by
    /// [`AclDevice::allow_shareable`] may import it.
    pub fn export_mapping(&self, at: DevicePtr, allow_list: bool) -> Result<u64, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let Some(handle) = sh.physical.lock().get(&at.0).map(|m| m.0) else {
            return Err(HalError::InvalidArgument(format!(
                "no physical memory was mapped at {at} by map_physical"
            )));
        };
        let flags = if allow_list {
            ACL_RT_VMM_EXPORT_FLAG_DEFAULT
        } else {
            ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION
        };
        let r = sh
            .calls
            .mem_export_to_shareable_handle(handle, flags)
            .ok_or_else(|| {
                missing(
                    "shareable handles: this ACL library has no aclrtMemExportToShareableHandle",
                )
            })?;
        Ok(sh.result("aclrtMemExportToShareableHandle", r)?)
    }

    /// Lets processes `pids` import shareable handle `shareable`
    /// (`aclrtMemSetPidToShareableHandle`).
    pub fn allow_shareable(&self, shareable: u64, pids: &[i32]) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let code = sh
            .calls
            .mem_set_pid_to_shareable_handle(shareable, pids)
            .ok_or_else(|| {
                missing(
                    "shareable handles: this ACL library has no aclrtMemSetPidToShareableHandle",
                )
            })?;
        Ok(sh.check("aclrtMemSetPidToShareableHandle", code)?)
    }

    /// Imports another process's shareable handle (`aclrtMemImportFromShareableHandle`) and
    /// maps its `size` bytes at `at`, inside a range reserved with `reserve_address`: the
    /// bytes there are the exporter's. `unmap_physical(at, size)` unmaps it and releases the
    /// import (`aclrtFreePhysical`).
    pub fn map_shareable(&self, shareable: u64, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let len = usize::try_from(size)
            .map_err(|_| HalError::InvalidArgument(format!("{size} bytes do not fit")))?;
        let r = sh
            .calls
            .mem_import_from_shareable_handle(shareable, sh.ordinal as i32)
            .ok_or_else(|| {
                missing(
                    "shareable handles: this ACL library has no aclrtMemImportFromShareableHandle",
                )
            })?;
        let handle = sh.result("aclrtMemImportFromShareableHandle", r)?;
        let mapped = sh
            .calls
            .map_mem(at.0, len, handle)
            .ok_or_else(|| missing("virtual memory (aclrtMapMem missing)"))
            .and_then(|code| Ok(sh.check("aclrtMapMem", code)?));
        if let Err(err) = mapped {
            if let Some(code) = sh.calls.free_physical(handle) {
                if let Err(free_err) = sh.check("aclrtFreePhysical", code) {
                    tracing::warn!(%free_err, "releasing an imported handle that did not map failed");
                }
            }
            return Err(err);
        }
        sh.physical.lock().insert(at.0, (handle, size));
        live::note(sh.library_key(), sh.ordinal, at.0, size);
        Ok(())
    }
}
