//! Types and flags of ACL's sharing between processes (IPC memory by key, virtual-memory
//! handles made shareable, IPC events), as CANN declares them in `acl_rt.h` (see
//! `docs/reference/acl-ipc-capture-mode.md` for where each was confirmed).

use std::ffi::c_char;

/// `ACL_EVENT_IPC`: an event other processes may wait on (`aclrtCreateEventExWithFlag`), to be
/// exported with `aclrtIpcGetEventHandle`.
pub const ACL_EVENT_IPC: u32 = 0x40;

/// The length of an IPC memory key, its terminating NUL included: `aclrtIpcMemGetExportKey`'s
/// `len` "is fixed to 65" (CANN's API reference; the header has no name for it).
pub const ACL_IPC_MEM_KEY_LEN: usize = 65;

/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT`: importers must be on the key's allow-list
/// (`aclrtIpcMemSetImportPid`).
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION`: any process may import the key.
pub const ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;
/// `ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT`: the importing device accesses the memory as a peer
/// only after `aclrtDeviceEnablePeerAccess`.
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT: u64 = 0x0;
/// `ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS`: the import enables peer access itself.
pub const ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x1;

/// `ACL_RT_VMM_EXPORT_FLAG_DEFAULT`: importers of a shareable handle must be on its allow-list
/// (`aclrtMemSetPidToShareableHandle`).
pub const ACL_RT_VMM_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// `ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION`: any process may import the handle.
pub const ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;

/// `ACL_IPC_EVENT_HANDLE_SIZE`: bytes of an [`aclrtIpcEventHandle`].
pub const ACL_IPC_EVENT_HANDLE_SIZE: usize = 64;

/// `aclrtIpcEventHandle`: an IPC event's handle, opaque bytes passed by value
/// (`aclrtIpcGetEventHandle` fills one, `aclrtIpcOpenEventHandle` takes one).
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct aclrtIpcEventHandle {
    /// `char reserved[ACL_IPC_EVENT_HANDLE_SIZE]`.
    pub reserved: [c_char; ACL_IPC_EVENT_HANDLE_SIZE],
}

impl Default for aclrtIpcEventHandle {
    fn default() -> Self {
        aclrtIpcEventHandle {
            reserved: [0; ACL_IPC_EVENT_HANDLE_SIZE],
        }
    }
}
