//! ACL's C types, flags and enum values (`acl_base_rt.h`, `acl_rt.h`, `acl_mdl.h`; see
//! `reference/acl-runtime.md` §1.2–1.9). Enum values are `u32`s, as the C enums are passed.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// `aclError`: 0 is success ([`super::codes`]).
pub type aclError = i32;
/// `aclrtStream` (null is the default stream).
pub type aclrtStream = *mut c_void;
/// `aclrtEvent`.
pub type aclrtEvent = *mut c_void;
/// `aclmdlRI`: a model run instance (a captured graph).
pub type aclmdlRI = *mut c_void;
/// `aclrtTaskGrp`: a task group of a capture (see `acl/TASK_GROUPS.md`).
pub type aclrtTaskGrp = *mut c_void;
/// `aclrtDrvMemHandle`: a physical memory handle (virtual-memory API).
pub type aclrtDrvMemHandle = *mut c_void;

/// `aclrtCreateStreamWithConfig` flag: pre-allocate resources for faster task submission.
pub const ACL_STREAM_FAST_LAUNCH: u32 = 0x1;
/// `aclrtCreateStreamWithConfig` flag: busy-poll in `aclrtSynchronizeStream`.
pub const ACL_STREAM_FAST_SYNC: u32 = 0x2;

/// Event flag: the event can be waited on (`aclrtStreamWaitEvent`) and used in capture.
pub const ACL_EVENT_SYNC: u32 = 0x1;
/// Event flag: the event tracks a capturing stream's progress.
pub const ACL_EVENT_CAPTURE_STREAM_PROGRESS: u32 = 0x2;
/// Event flag: the event records timestamps (`aclrtEventElapsedTime`).
pub const ACL_EVENT_TIME_LINE: u32 = 0x8;

/// `aclrtStreamStatus::ACL_STREAM_STATUS_COMPLETE`.
pub const ACL_STREAM_STATUS_COMPLETE: u32 = 0;
/// `aclrtStreamStatus::ACL_STREAM_STATUS_NOT_READY`.
pub const ACL_STREAM_STATUS_NOT_READY: u32 = 1;

/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_NOT_READY` (note: 0, unlike streams).
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: u32 = 0;
/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_COMPLETE`.
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: u32 = 1;

/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST`: 2 MB pages, normal pages when they run out.
pub const ACL_MEM_MALLOC_HUGE_FIRST: u32 = 0;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_ONLY`.
pub const ACL_MEM_MALLOC_HUGE_ONLY: u32 = 1;
/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_NORMAL_ONLY`.
pub const ACL_MEM_MALLOC_NORMAL_ONLY: u32 = 2;

/// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_HOST`.
pub const ACL_MEMCPY_HOST_TO_HOST: u32 = 0;
/// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE`.
pub const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST`.
pub const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_DEVICE`.
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEFAULT`: direction inferred from the addresses.
pub const ACL_MEMCPY_DEFAULT: u32 = 4;

/// `aclrtMemAttr::ACL_DDR_MEM`.
pub const ACL_DDR_MEM: u32 = 0;
/// `aclrtMemAttr::ACL_HBM_MEM`: device memory, what torch_npu asks `aclrtGetMemInfo` about.
pub const ACL_HBM_MEM: u32 = 1;
/// `aclrtMemAttr::ACL_DDR_MEM_HUGE`.
pub const ACL_DDR_MEM_HUGE: u32 = 2;
/// `aclrtMemAttr::ACL_DDR_MEM_NORMAL`.
pub const ACL_DDR_MEM_NORMAL: u32 = 3;
/// `aclrtMemAttr::ACL_HBM_MEM_HUGE`: HBM in huge pages (physical memory of expandable
/// segments).
pub const ACL_HBM_MEM_HUGE: u32 = 4;

/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`.
pub const ACL_MODEL_RI_CAPTURE_MODE_GLOBAL: u32 = 0;
/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`.
pub const ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: u32 = 1;
/// `aclmdlRICaptureMode::ACL_MODEL_RI_CAPTURE_MODE_RELAXED`.
pub const ACL_MODEL_RI_CAPTURE_MODE_RELAXED: u32 = 2;

/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_NONE`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_NONE: u32 = 0;
/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE: u32 = 1;
/// `aclmdlRICaptureStatus::ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED`.
pub const ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED: u32 = 2;

/// `aclrtMemHandleType::ACL_MEM_HANDLE_TYPE_NONE`.
pub const ACL_MEM_HANDLE_TYPE_NONE: u32 = 0;
/// `aclrtMemAllocationType::ACL_MEM_ALLOCATION_TYPE_PINNED`.
pub const ACL_MEM_ALLOCATION_TYPE_PINNED: u32 = 0;
/// `aclrtMemLocationType::ACL_MEM_LOCATION_TYPE_DEVICE`.
pub const ACL_MEM_LOCATION_TYPE_DEVICE: u32 = 1;
/// `aclrtMemGranularityOptions::ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM`.
pub const ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM: u32 = 0;

/// `aclrtPhysicalMemProp` (virtual-memory API, for expandable segments). The C struct nests
/// `aclrtMemLocation location { uint32_t id; aclrtMemLocationType type; }`; its two fields
/// are inlined here as `location_id` and `location_type`, with the same layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct aclrtPhysicalMemProp {
    /// `aclrtMemHandleType handleType`.
    pub handle_type: u32,
    /// `aclrtMemAllocationType allocationType`.
    pub allocation_type: u32,
    /// `aclrtMemAttr memAttr`.
    pub mem_attr: u32,
    /// `location.id`: the device.
    pub location_id: u32,
    /// `location.type` (`aclrtMemLocationType`).
    pub location_type: u32,
    /// `uint64_t reserve`: 0.
    pub reserve: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_physical_memory_properties_have_the_c_layout() {
        // Five 32-bit fields (20 bytes), then a 64-bit one aligned to 8: 32 bytes.
        assert_eq!(
            std::mem::offset_of!(aclrtPhysicalMemProp, location_type),
            16
        );
        assert_eq!(std::mem::offset_of!(aclrtPhysicalMemProp, reserve), 24);
        assert_eq!(std::mem::size_of::<aclrtPhysicalMemProp>(), 32);
    }
}
