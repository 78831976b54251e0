//! Small value types shared by the hal and the front layer.

use std::fmt;

/// An address in a device's memory space.
///
/// Device addresses are plain numbers on the host: holding one gives no access to the memory,
/// so they are `Copy` and carry no lifetime. Ownership of memory lives in the types that hand
/// addresses out (`DeviceMemory`, the allocator's buffers).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device address.
    pub const NULL: DevicePtr = DevicePtr(0);

    /// The address `bytes` past this one, or `None` on overflow.
    pub fn checked_add(self, bytes: u64) -> Option<DevicePtr> {
        self.0.checked_add(bytes).map(DevicePtr)
    }

    /// The raw address.
    pub fn addr(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// The address of page-locked (pinned) host memory from [`crate::hal::Device::alloc_host`].
///
/// Like [`DevicePtr`] it is only an address: holding one grants no access (reading or writing
/// through [`HostPtr::as_ptr`] is `unsafe`), so it is `Copy`, `Send` and `Sync`. Ownership lives
/// in the types that hand it out (the pinned host allocator's buffers).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPtr(std::ptr::NonNull<u8>);

// SAFETY: a `HostPtr` is an address with no access rights of its own; every access goes through
// a raw pointer under the contract of whoever owns the memory.
unsafe impl Send for HostPtr {}
// SAFETY: as above; sharing the address shares no access.
unsafe impl Sync for HostPtr {}

impl HostPtr {
    /// Wraps a non-null host address.
    pub fn new(ptr: *mut u8) -> Option<HostPtr> {
        std::ptr::NonNull::new(ptr).map(HostPtr)
    }

    /// The address as a raw pointer.
    pub fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }

    /// The address as a number.
    pub fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }
}

impl fmt::Debug for HostPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.addr())
    }
}

impl fmt::Display for HostPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.addr())
    }
}

/// A device's identity in errors, logs and reports: its backend, its ordinal on the host, and
/// a number unique in the process (two simulated devices may share an ordinal; their `uid`s
/// tell them apart).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DeviceId {
    /// The backend's name (`sim`, `acl`).
    pub backend: &'static str,
    /// The device's ordinal on the host.
    pub ordinal: u32,
    /// Unique among the devices this process opened.
    pub uid: u64,
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} device {} (#{})",
            self.backend, self.ordinal, self.uid
        )
    }
}

/// A byte range of device memory: what a kernel, copy or memset reads or writes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct DeviceSlice {
    /// First byte.
    pub ptr: DevicePtr,
    /// Length in bytes.
    pub len: u64,
}

impl fmt::Display for DeviceSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, +{} bytes)", self.ptr, self.len)
    }
}

impl DeviceSlice {
    /// A slice of `len` bytes starting at `ptr`.
    pub fn new(ptr: DevicePtr, len: u64) -> Self {
        DeviceSlice { ptr, len }
    }

    /// One past the last byte (saturating).
    pub fn end(&self) -> u64 {
        self.ptr.0.saturating_add(self.len)
    }

    /// Number of `f32` elements the slice holds (whole elements only).
    pub fn f32_len(&self) -> u64 {
        self.len / 4
    }

    /// A sub-slice of `len` bytes at byte `offset`, or `None` if it does not fit.
    pub fn sub(&self, offset: u64, len: u64) -> Option<DeviceSlice> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| DeviceSlice::new(DevicePtr(self.ptr.0 + offset), len))
    }

    /// Whether two slices share at least one byte.
    pub fn overlaps(&self, other: &DeviceSlice) -> bool {
        self.len > 0 && other.len > 0 && self.ptr.0 < other.end() && other.ptr.0 < self.end()
    }

    /// Whether `other` lies entirely inside this slice.
    pub fn contains(&self, other: &DeviceSlice) -> bool {
        other.ptr.0 >= self.ptr.0 && other.end() <= self.end()
    }
}

/// Identifies a stream within its device. The default stream is always `StreamId(0)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct StreamId(pub u32);

impl StreamId {
    /// The device's default stream.
    pub const DEFAULT: StreamId = StreamId(0);

    /// Index into per-stream tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            write!(f, "stream 0 (default)")
        } else {
            write!(f, "stream {}", self.0)
        }
    }
}

/// Stream priority as ACL and CUDA express it: smaller numbers are higher priority, 0 is normal.
pub type Priority = i32;

/// Options for creating an event, combined like bitflags: [`EventFlags::empty`] (also
/// `EventFlags::default()` and [`EventFlags::ORDERING`]) for an event that only orders,
/// [`EventFlags::TIMING`] for `elapsed_ms`, [`EventFlags::EXTERNAL`], and `|` to combine.
///
/// ```
/// use braid_stream_core::EventFlags;
/// assert_eq!(EventFlags::empty(), EventFlags::default());
/// let both = EventFlags::TIMING | EventFlags::EXTERNAL;
/// assert!(both.contains(EventFlags::TIMING) && both.external);
/// assert!(EventFlags::empty().is_empty() && !both.is_empty());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct EventFlags {
    /// Record timestamps so `elapsed_ms` works (costs a little at record time).
    pub timing: bool,
    /// An external event (CUDA's external event record and wait nodes): it orders graphs
    /// captured separately. Recorded on a capturing stream it becomes a record node of the
    /// graph (the event counts as recorded when the graph is launched); waited on from a
    /// capturing stream it becomes a wait node (each launch waits for the event's last
    /// launched or eager record). See [`crate::capture_rule`].
    pub external: bool,
}

impl EventFlags {
    /// An event that records timestamps.
    pub const TIMING: EventFlags = EventFlags {
        timing: true,
        external: false,
    };
    /// An event used only for ordering.
    pub const ORDERING: EventFlags = EventFlags {
        timing: false,
        external: false,
    };
    /// An external event, for ordering graphs captured separately (see
    /// [`EventFlags::external`]).
    pub const EXTERNAL: EventFlags = EventFlags {
        timing: false,
        external: true,
    };

    /// No flag: an event used only for ordering (the same as [`EventFlags::ORDERING`] and
    /// `EventFlags::default()`).
    pub const fn empty() -> EventFlags {
        EventFlags::ORDERING
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        !self.timing && !self.external
    }

    /// Whether every flag of `other` is set in `self`.
    pub const fn contains(self, other: EventFlags) -> bool {
        (self.timing || !other.timing) && (self.external || !other.external)
    }
}

impl std::ops::BitOr for EventFlags {
    type Output = EventFlags;
    /// The flags of both.
    fn bitor(self, other: EventFlags) -> EventFlags {
        EventFlags {
            timing: self.timing || other.timing,
            external: self.external || other.external,
        }
    }
}

impl std::ops::BitOrAssign for EventFlags {
    fn bitor_assign(&mut self, other: EventFlags) {
        *self = *self | other;
    }
}

/// How strictly a capture forbids calls that would break it (ACL's `aclmdlRICaptureMode`,
/// CUDA's `cudaStreamCaptureMode`). A capture is begun with a mode, and every thread has one
/// too (global unless exchanged: [`crate::Device::capture_mode_guard`]); the two together
/// decide which calls a thread may make ([`crate::capture_mode`] has the rule).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum CaptureMode {
    /// As a capture's mode: while it is active, no thread whose own mode is global may
    /// synchronize or query a stream, event or the device, nor use the default stream. As a
    /// thread's mode (the default): the thread is restricted by its own non-relaxed captures
    /// and by other threads' global ones.
    #[default]
    Global,
    /// As a capture's mode: only the thread that began the capture is restricted. As a
    /// thread's mode: only the thread's own non-relaxed captures restrict it.
    ThreadLocal,
    /// As a capture's mode: only objects that belong to the capture are restricted. As a
    /// thread's mode: no capture's mode restricts the thread.
    Relaxed,
}

impl fmt::Display for CaptureMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CaptureMode::Global => "global",
            CaptureMode::ThreadLocal => "thread-local",
            CaptureMode::Relaxed => "relaxed",
        })
    }
}

/// Capture status of a stream as the backend reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CaptureStatus {
    /// Not capturing.
    None,
    /// Capturing (as origin or as a joined stream).
    Active,
    /// A capture that failed and must be ended.
    Invalidated,
}

/// Free and total bytes of device memory.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MemInfo {
    /// Bytes the device can still hand out.
    pub free: u64,
    /// Capacity of the device.
    pub total: u64,
}
