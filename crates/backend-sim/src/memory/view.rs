//! The data store of a node as seen by one op: every device's memory, reached by address.

use super::{Memory, BASE_ADDRESS, DEVICE_SPAN};
use braid_stream_core::types::{DevicePtr, DeviceSlice};

/// The memories of all devices of a node, for the data effects of an op of device `own`.
///
/// A range goes to the device whose address space holds its start (each device of a node has
/// its own, see [`DEVICE_SPAN`]); a range in no device's space goes to `own`, where it is an
/// invalid access. Panicking host operators are counted on `own`.
pub(crate) struct DataView<'a> {
    mems: &'a mut [Memory],
    own: usize,
}

impl<'a> DataView<'a> {
    /// The view of an op of device `own` (an index into `mems`).
    pub fn new(mems: &'a mut [Memory], own: usize) -> Self {
        DataView { mems, own }
    }

    /// The memory holding `addr`.
    fn at(&mut self, addr: u64) -> &mut Memory {
        let index = addr
            .checked_sub(BASE_ADDRESS)
            .map(|off| off / DEVICE_SPAN)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < self.mems.len())
            .unwrap_or(self.own);
        &mut self.mems[index]
    }

    /// See [`Memory::is_valid`].
    pub fn is_valid(&mut self, s: DeviceSlice) -> bool {
        self.at(s.ptr.0).is_valid(s)
    }

    /// See [`Memory::read`].
    pub fn read(&mut self, s: DeviceSlice) -> Option<Vec<u8>> {
        self.at(s.ptr.0).read(s)
    }

    /// See [`Memory::read_into`].
    pub fn read_into(&mut self, s: DeviceSlice, out: &mut [u8]) -> bool {
        self.at(s.ptr.0).read_into(s, out)
    }

    /// See [`Memory::pin`].
    pub fn pin(&mut self, s: DeviceSlice) -> Option<super::Pin> {
        self.at(s.ptr.0).pin(s)
    }

    /// See [`Memory::place`].
    pub fn place(&mut self, s: DeviceSlice) -> Option<super::Place> {
        self.at(s.ptr.0).place(s)
    }

    /// See [`Memory::note_written`].
    pub fn note_written(&mut self, ptr: DevicePtr, len: u64) {
        self.at(ptr.0).note_written(ptr, len);
    }

    /// See [`Memory::fill`].
    pub fn fill(&mut self, ptr: DevicePtr, len: u64, value: u8) {
        self.at(ptr.0).fill(ptr, len, value);
    }

    /// See [`Memory::write`].
    pub fn write(&mut self, ptr: DevicePtr, data: &[u8]) {
        self.at(ptr.0).write(ptr, data);
    }

    /// Counts one invalid access on the op's device.
    pub fn note_invalid(&mut self) {
        self.mems[self.own].note_invalid();
    }

    /// Counts one panicking operator on the op's device.
    pub fn note_failed_op(&mut self) {
        self.mems[self.own].note_failed_op();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_go_to_the_device_that_owns_them() {
        let mut mems = vec![
            Memory::for_device(0, 1 << 30, true),
            Memory::for_device(1, 1 << 30, true),
        ];
        let a = mems[0].alloc(64).unwrap();
        let b = mems[1].alloc(64).unwrap();
        assert_eq!(b.0 - a.0, DEVICE_SPAN);
        assert!(mems[1].owns(b.0) && !mems[0].owns(b.0));
        let mut view = DataView::new(&mut mems, 0);
        view.write(b, &[7, 8]);
        assert_eq!(view.read(DeviceSlice::new(b, 2)).unwrap(), vec![7, 8]);
        assert!(view.is_valid(DeviceSlice::new(a, 64)));
        view.note_failed_op();
        view.write(DevicePtr(3), &[1]);
        assert_eq!(mems[0].invalid_accesses(), 1);
        assert_eq!(mems[0].failed_ops(), 1);
        assert_eq!(mems[1].invalid_accesses(), 0);
        // Device 0's memory does not hold device 1's allocation.
        assert!(!mems[0].is_valid(DeviceSlice::new(b, 2)));
    }
}
