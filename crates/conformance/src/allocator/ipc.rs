//! A block shared with other processes ([`DeviceBuffer::export_ipc`]) goes back to the cache
//! when its export closes with no importer, and the cache may hand it out, and it be shared,
//! again.
//!
//! [`DeviceBuffer::export_ipc`]: braid_allocator::DeviceBuffer::export_ipc

use super::N;
use crate::support::{all_equal, allocator, allocator_works, download, fill};
use crate::{CaseError, Harness};
use braid_allocator::{AllocError, AllocatorConfig};
use braid_stream_core::hal::{Backend, HalError};
use braid_stream_core::StreamError;

/// A buffer shared and let go with no importer is freed into the cache; the same block,
/// allocated again, is shared again with its new data (the simulator refused this: "overlap
/// a range already shared"). On a backend without IPC the export is a typed `Unsupported`.
pub fn cached_block_shared_again_after_its_export_closed<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let alloc = allocator(&device, AllocatorConfig::new())?;
    let s = device.create_stream(0)?;
    let first = alloc.alloc(N * 4, &s)?;
    let ptr = first.ptr();
    fill(&s, first.slice(), 1.0)?;
    let shared = match first.export_ipc(false) {
        Err(AllocError::Stream(StreamError::Backend(HalError::Unsupported(_)))) => {
            return allocator_works(&alloc);
        }
        shared => shared?,
    };
    all_equal(&download(&s, shared.slice())?, 1.0, "the data, shared")?;
    ensure_eq!(shared.importers(), 0, "no process imports it");
    drop(shared);
    let again = alloc.alloc(N * 4, &s)?;
    ensure_eq!(again.ptr(), ptr, "the cached block, allocated again");
    fill(&s, again.slice(), 2.0)?;
    let shared = again.export_ipc(false)?;
    all_equal(
        &download(&s, shared.slice())?,
        2.0,
        "the new data, shared again",
    )?;
    fill(&s, shared.slice(), 3.0)?;
    all_equal(&download(&s, shared.slice())?, 3.0, "written after sharing")?;
    drop(shared);
    allocator_works(&alloc)
}
