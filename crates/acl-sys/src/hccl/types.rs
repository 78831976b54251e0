//! HCCL's C types and enum values (`hccl_types.h`; `reference/aclnn-hccl.md` B.1). Enums are
//! passed as C `int`s.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// `HcclResult`: 0 is success ([`super::codes`]).
pub type HcclResult = i32;

/// `HcclComm`: an opaque communicator handle.
pub type HcclComm = *mut c_void;

/// `HCCL_ROOT_INFO_BYTES`: the size of [`HcclRootInfo`].
pub const HCCL_ROOT_INFO_BYTES: usize = 4108;

/// `HcclRootInfo`: opaque bytes rank 0 makes (`HcclGetRootInfo`) and the user ships to every
/// other rank out of band (`HcclCommInitRootInfo`).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HcclRootInfo {
    /// The bytes (`char internal[HCCL_ROOT_INFO_BYTES]`).
    pub internal: [u8; HCCL_ROOT_INFO_BYTES],
}

impl Default for HcclRootInfo {
    fn default() -> Self {
        HcclRootInfo {
            internal: [0; HCCL_ROOT_INFO_BYTES],
        }
    }
}

/// `HcclDataType` (a C enum).
pub type HcclDataType = i32;
/// `HCCL_DATA_TYPE_INT8`.
pub const HCCL_DATA_TYPE_INT8: HcclDataType = 0;
/// `HCCL_DATA_TYPE_INT16`.
pub const HCCL_DATA_TYPE_INT16: HcclDataType = 1;
/// `HCCL_DATA_TYPE_INT32`.
pub const HCCL_DATA_TYPE_INT32: HcclDataType = 2;
/// `HCCL_DATA_TYPE_FP16`.
pub const HCCL_DATA_TYPE_FP16: HcclDataType = 3;
/// `HCCL_DATA_TYPE_FP32`.
pub const HCCL_DATA_TYPE_FP32: HcclDataType = 4;
/// `HCCL_DATA_TYPE_INT64`.
pub const HCCL_DATA_TYPE_INT64: HcclDataType = 5;
/// `HCCL_DATA_TYPE_UINT64`.
pub const HCCL_DATA_TYPE_UINT64: HcclDataType = 6;
/// `HCCL_DATA_TYPE_UINT8`.
pub const HCCL_DATA_TYPE_UINT8: HcclDataType = 7;
/// `HCCL_DATA_TYPE_UINT16`.
pub const HCCL_DATA_TYPE_UINT16: HcclDataType = 8;
/// `HCCL_DATA_TYPE_UINT32`.
pub const HCCL_DATA_TYPE_UINT32: HcclDataType = 9;
/// `HCCL_DATA_TYPE_FP64`.
pub const HCCL_DATA_TYPE_FP64: HcclDataType = 10;
/// `HCCL_DATA_TYPE_BFP16`: bfloat16.
pub const HCCL_DATA_TYPE_BFP16: HcclDataType = 11;

/// `HcclReduceOp` (a C enum).
pub type HcclReduceOp = i32;
/// `HCCL_REDUCE_SUM`.
pub const HCCL_REDUCE_SUM: HcclReduceOp = 0;
/// `HCCL_REDUCE_PROD`.
pub const HCCL_REDUCE_PROD: HcclReduceOp = 1;
/// `HCCL_REDUCE_MAX`.
pub const HCCL_REDUCE_MAX: HcclReduceOp = 2;
/// `HCCL_REDUCE_MIN`.
pub const HCCL_REDUCE_MIN: HcclReduceOp = 3;

/// `HcclSendRecvType` (a C enum): whether an [`HcclSendRecvItem`] sends or receives.
pub type HcclSendRecvType = i32;
/// `HCCL_SEND`.
pub const HCCL_SEND: HcclSendRecvType = 0;
/// `HCCL_RECV`.
pub const HCCL_RECV: HcclSendRecvType = 1;

/// `HcclSendRecvItem`: one send or receive of an `HcclBatchSendRecv` (`hccl_types.h`;
/// confirmed in `hccl/REFERENCE.md`).
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HcclSendRecvItem {
    /// [`HCCL_SEND`] or [`HCCL_RECV`].
    pub send_recv_type: HcclSendRecvType,
    /// The device buffer sent from or received into.
    pub buf: *mut c_void,
    /// Elements sent or received.
    pub count: u64,
    /// Their type.
    pub data_type: HcclDataType,
    /// The peer rank in the communicator.
    pub remote_rank: u32,
}

/// `HcclSendRecvItem` has the C layout: an `int`, padding, a pointer, a `uint64_t`, an `int`
/// and a `uint32_t` (32 bytes on 64-bit targets).
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<HcclSendRecvItem>() == 32);

/// `HcclRootInfo` is exactly the C struct's size.
const _: () = assert!(std::mem::size_of::<HcclRootInfo>() == HCCL_ROOT_INFO_BYTES);

/// `HCCL_COMM_CONFIG_INFO_BYTES`: the size of [`HcclCommConfig`]'s reserved header.
pub const HCCL_COMM_CONFIG_INFO_BYTES: usize = 24;
/// `HCCL_COMM_CONFIG_MAGIC_WORD`: marks an initialized [`HcclCommConfig`].
pub const HCCL_COMM_CONFIG_MAGIC_WORD: u32 = 0xf0f0_f0f0;
/// The `HCCL_COMM_CONFIG_VERSION` of the layout [`HcclCommConfig`] declares (HCCL reads a
/// config by its version and size, so older layouts stay valid).
pub const HCCL_COMM_CONFIG_VERSION: u32 = 1;
/// `HCCL_COMM_DEFAULT_BUFFSIZE`: the default buffer size, in MB.
pub const HCCL_COMM_DEFAULT_BUFFSIZE: u32 = 200;

/// `HcclCommConfig`, version 1 of its layout (`hccl_types.h`): a reserved header
/// (`size_t configSize; uint32_t magicWord; uint32_t version; char reserved[8]`), the buffer
/// size in MB and the deterministic switch. Later releases append fields and raise the
/// version; they read a version-1 config by its size.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct HcclCommConfig {
    /// `char reserved[HCCL_COMM_CONFIG_INFO_BYTES]`: size, magic word, version.
    pub reserved: [u8; HCCL_COMM_CONFIG_INFO_BYTES],
    /// `uint32_t hcclBufferSize`, in MB.
    pub hccl_buffer_size: u32,
    /// `uint32_t hcclDeterministic`: 0 off, 1 on.
    pub hccl_deterministic: u32,
}

impl Default for HcclCommConfig {
    /// What the header's inline `HcclCommConfigInit` writes (it is no exported symbol): the
    /// header of this layout and the default settings.
    fn default() -> Self {
        let mut reserved = [0u8; HCCL_COMM_CONFIG_INFO_BYTES];
        let size = std::mem::size_of::<HcclCommConfig>();
        reserved[..8].copy_from_slice(&(size as u64).to_ne_bytes());
        reserved[8..12].copy_from_slice(&HCCL_COMM_CONFIG_MAGIC_WORD.to_ne_bytes());
        reserved[12..16].copy_from_slice(&HCCL_COMM_CONFIG_VERSION.to_ne_bytes());
        HcclCommConfig {
            reserved,
            hccl_buffer_size: HCCL_COMM_DEFAULT_BUFFSIZE,
            hccl_deterministic: 0,
        }
    }
}

impl HcclCommConfig {
    /// Whether the header is one [`HcclCommConfig::default`] writes: the magic word, a known
    /// version and a size of at least this layout's.
    pub fn is_initialized(&self) -> bool {
        let word = |at: usize| {
            u32::from_ne_bytes(self.reserved[at..at + 4].try_into().unwrap_or_default())
        };
        let size = u64::from_ne_bytes(self.reserved[..8].try_into().unwrap_or_default());
        word(8) == HCCL_COMM_CONFIG_MAGIC_WORD
            && word(12) >= 1
            && size >= std::mem::size_of::<HcclCommConfig>() as u64
    }
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn the_default_config_is_version_one_of_32_bytes_and_marked_initialized() {
        assert_eq!(std::mem::size_of::<HcclCommConfig>(), 32);
        let config = HcclCommConfig::default();
        assert!(config.is_initialized());
        assert_eq!(
            (config.hccl_buffer_size, config.hccl_deterministic),
            (200, 0)
        );
        let mut zeroed = config;
        zeroed.reserved = [0; HCCL_COMM_CONFIG_INFO_BYTES];
        assert!(!zeroed.is_initialized());
    }
}
