//! Which device of the process owns an address: every range braid allocated (`aclrtMalloc`)
//! or mapped (`aclrtMapMem`) through a library, by library and device ordinal. ACL devices of
//! one process share one address space, so hal `Device::is_live` can tell memory of its
//! device from memory of another device (the front layer then asks for peer access, or
//! refuses with `StreamError::ForeignMemory`). Ranges braid did not allocate (raw `aclrtMalloc`
//! outside braid, HCCL's buffers) and freed ranges are unknown: `is_live` answers `None`.

use braid_stream_core::sync::GlobalMutex;
use std::collections::{BTreeMap, HashMap};

/// The ranges one library handed out: start address → (length, ordinal).
type Ranges = BTreeMap<u64, (u64, u32)>;

/// The ranges of every library, by [`crate::device::Shared::library_key`].
static LIVE: GlobalMutex<Option<HashMap<usize, Ranges>>> = GlobalMutex::new(None);

/// Notes `len` bytes at `ptr` of device `ordinal` of library `library` as allocated.
pub(crate) fn note(library: usize, ordinal: u32, ptr: u64, len: u64) {
    let mut live = LIVE.lock();
    live.get_or_insert_with(HashMap::new)
        .entry(library)
        .or_default()
        .insert(ptr, (len, ordinal));
}

/// Forgets the range starting at `ptr` of library `library` (freed or unmapped).
pub(crate) fn forget(library: usize, ptr: u64) {
    let mut live = LIVE.lock();
    if let Some(ranges) = live.as_mut().and_then(|l| l.get_mut(&library)) {
        ranges.remove(&ptr);
    }
}

/// The ordinal of the device whose noted ranges (one, or several back to back, as mappings
/// of an expandable segment are) cover every byte of `[ptr, ptr + len)`, or `None` where a
/// byte is in no noted range or the covering ranges belong to several devices.
pub(crate) fn owner(library: usize, ptr: u64, len: u64) -> Option<u32> {
    let live = LIVE.lock();
    let ranges = live.as_ref()?.get(&library)?;
    owner_in(ranges, ptr, len)
}

fn owner_in(ranges: &Ranges, ptr: u64, len: u64) -> Option<u32> {
    let end = ptr.checked_add(len.max(1))?;
    let mut owner = None;
    let mut at = ptr;
    while at < end {
        let (&start, &(size, ordinal)) = ranges.range(..=at).next_back()?;
        let range_end = start.saturating_add(size);
        if range_end <= at || owner.is_some_and(|o| o != ordinal) {
            return None;
        }
        owner = Some(ordinal);
        at = range_end;
    }
    owner
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_covers_back_to_back_ranges_of_one_device_only() {
        let ranges: Ranges = [
            (0x1000, (0x1000, 0)),
            (0x2000, (0x1000, 0)),
            (0x8000, (0x100, 1)),
        ]
        .into_iter()
        .collect();
        assert_eq!(owner_in(&ranges, 0x1000, 0x1000), Some(0));
        assert_eq!(
            owner_in(&ranges, 0x1800, 0x1000),
            Some(0),
            "across two mappings"
        );
        assert_eq!(owner_in(&ranges, 0x8010, 0x10), Some(1));
        assert_eq!(
            owner_in(&ranges, 0x8010, 0),
            Some(1),
            "an empty range at an address"
        );
        assert_eq!(owner_in(&ranges, 0x2800, 0x1000), None, "runs past the end");
        assert_eq!(owner_in(&ranges, 0x500, 0x10), None, "before every range");
        assert_eq!(owner_in(&ranges, 0x4000, 0x10), None, "in a gap");
        assert_eq!(owner_in(&ranges, u64::MAX, 2), None, "overflow");
    }

    #[test]
    fn noted_ranges_are_per_library_and_forgotten() {
        // Keys no real library has (a static's address is never this small).
        let (lib, other) = (3, 5);
        note(lib, 2, 0x10_000, 0x100);
        assert_eq!(owner(lib, 0x10_010, 8), Some(2));
        assert_eq!(owner(other, 0x10_010, 8), None);
        forget(lib, 0x10_000);
        assert_eq!(owner(lib, 0x10_010, 8), None);
    }
}
