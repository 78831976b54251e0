//! The front layer's typed errors.

use crate::custom::OpError;
use crate::hal::HalError;
use crate::ipc::IpcError;
use crate::kernel::KernelError;
use crate::types::{CaptureMode, DeviceId, DeviceSlice, StreamId};
use std::borrow::Cow;

/// Everything the front layer can refuse or report. After any of these the device, its streams
/// and events stay consistent and usable.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum StreamError {
    /// The backend failed. (A backend's typed IPC refusal, [`HalError::Ipc`], converts to
    /// [`StreamError::Ipc`] instead.)
    #[error(transparent)]
    Backend(HalError),
    /// A kernel's declared ranges do not fit its shape.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// An IPC call's arguments are invalid ([`crate::ipc`]).
    #[error(transparent)]
    Ipc(#[from] IpcError),
    /// A user-defined operator's declaration is invalid.
    #[error(transparent)]
    Op(#[from] OpError),
    /// Work declared a range that is not live memory of the stream's device, nor of any
    /// device it can reach as a peer.
    #[error("{work} uses {range}, which is not live memory of {device} nor of any device it can reach (freed, never allocated, or memory of an unrelated device)")]
    RangeNotLive {
        /// The kernel, operator, copy or memset.
        work: String,
        /// The range.
        range: DeviceSlice,
        /// The stream's device.
        device: DeviceId,
    },
    /// A dry run's closure used a device other than the dry run's, or a thread used the
    /// device a dry run fences while it runs (`crate::dry_run`): the call was refused before
    /// anything was enqueued or allocated.
    #[error("{call} on {device} during a dry run on {dry_run}: a dry run may only use its own device, and the device it plans for is refused to every thread until it ends; issue the closure's work through its context (ctx.stream(), ctx.alloc(), ctx.device()) and pass the real device's buffers and streams only to the real capture")]
    DryRunTouchedDevice {
        /// The call refused.
        call: &'static str,
        /// The device it was made on.
        device: DeviceId,
        /// The dry run's device.
        dry_run: DeviceId,
    },
    /// Work on one device's stream used memory of another device without a peer relation
    /// (boxed: it names two devices, and `StreamError` stays small for every other result).
    #[error(transparent)]
    ForeignMemory(Box<ForeignMemory>),
    /// Peer access from one device to another is not possible (or was not enabled for a peer
    /// copy).
    #[error("peer access from {from} to {to} is unavailable: {reason}")]
    PeerAccessUnavailable {
        /// The device whose streams would access the memory.
        from: DeviceId,
        /// The device that owns the memory.
        to: DeviceId,
        /// Why.
        reason: String,
    },
    /// A host-blocking call was made while a capture forbids it.
    #[error("{call} is not allowed while {stream} is capturing a graph (it would synchronize with work that is only being recorded)")]
    ForbiddenDuringCapture {
        /// The call that was refused, e.g. `Stream::synchronize`.
        call: &'static str,
        /// The capturing stream that forbids it.
        stream: StreamId,
    },
    /// A call a capture's mode forbids on this thread (ACL's 107030
    /// `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT`, CUDA's `cudaErrorStreamCaptureUnsupported`): it
    /// would break the capture of `stream`; [`crate::capture_mode`] has the rule.
    #[error("{call} is not allowed on this thread while {stream} captures in {capture_mode} mode and this thread's capture mode is {thread_mode}: make the call outside the capture, or switch this thread to {allowed_by} mode around it (Device::capture_mode_guard)")]
    CaptureModeForbids {
        /// The call that was refused, e.g. `Stream::synchronize`.
        call: &'static str,
        /// The capturing stream whose capture forbids it.
        stream: StreamId,
        /// The mode that capture was begun with.
        capture_mode: CaptureMode,
        /// The calling thread's mode.
        thread_mode: CaptureMode,
        /// The least permissive thread mode that would allow the call.
        allowed_by: CaptureMode,
    },
    /// A thread's capture mode was exchanged while no capture is active on the device.
    #[error("no capture is active on {device}, so this thread's capture mode restricts nothing: begin the capture first, then exchange the mode to {mode} for the calls that need it (Device::capture_mode_guard)")]
    ModeExchangeOutsideCapture {
        /// The device.
        device: DeviceId,
        /// The mode asked for.
        mode: CaptureMode,
    },
    /// Work was submitted to the default stream while a capture is active on the device.
    #[error("{call} on the default stream is not allowed while {capturing} is capturing (the default stream would create an implicit dependency)")]
    DefaultStreamDuringCapture {
        /// The call that was refused.
        call: &'static str,
        /// The capturing stream.
        capturing: StreamId,
    },
    /// The device has no stream left for a new stream or for the streams a captured graph
    /// holds (ACL's 207008 `ACL_ERROR_RT_NO_STREAM_RESOURCE`).
    #[error("{call} needs {needed} more stream(s), but {live} of the {limit} streams {device} allows are alive (the default stream and the streams captured graphs hold included): drop streams and graphs no longer needed, and draw capture streams from the device's pool (Device::lease_stream) instead of creating streams per graph")]
    StreamsExhausted {
        /// The call that needed streams.
        call: &'static str,
        /// The device.
        device: DeviceId,
        /// Streams alive.
        live: u32,
        /// The most the device allows.
        limit: u32,
        /// Streams the call needed.
        needed: u32,
    },
    /// Capture was begun on the default stream.
    #[error("graphs must be captured on a non-default stream")]
    CaptureOnDefaultStream,
    /// Capture was begun on a stream that is already part of a capture.
    #[error("{stream} is already capturing")]
    AlreadyCapturing {
        /// The stream.
        stream: StreamId,
    },
    /// End of capture was requested on a stream that is not capturing.
    #[error("{stream} is not capturing")]
    NotCapturing {
        /// The stream.
        stream: StreamId,
    },
    /// End of capture was requested on a joined stream instead of the stream that began it.
    #[error("capture must end on its origin {origin}, not on {stream}")]
    NotCaptureOrigin {
        /// Where end was requested.
        stream: StreamId,
        /// Where the capture began.
        origin: StreamId,
    },
    /// A stream joined the capture and never rejoined the origin stream (ACL error 107025).
    #[error("{stream} joined the capture of {origin} at its position {joined_at} but its work up to position {last_work} was never joined back to {origin}: record an event on {stream} after its last captured work and wait on it from {origin} before ending the capture")]
    UnjoinedStream {
        /// The stream that did not rejoin.
        stream: StreamId,
        /// The origin stream.
        origin: StreamId,
        /// Position of the stream when it joined (forked from the capture).
        joined_at: u64,
        /// Position of its last captured work.
        last_work: u64,
    },
    /// A wait would connect work inside a capture with work outside it.
    #[error("{stream} cannot wait on an event {reason}")]
    CaptureIsolation {
        /// The waiting stream.
        stream: StreamId,
        /// Why the wait crosses a capture boundary.
        reason: &'static str,
    },
    /// `elapsed_ms` on an event created without timing.
    #[error(
        "elapsed time needs both events created with timing: create them with \
         `EventFlags::TIMING` (`device.create_event(EventFlags::TIMING)`)"
    )]
    EventWithoutTiming,
    /// `elapsed_ms` on an event never recorded.
    #[error("both events must be recorded before computing elapsed time")]
    EventNotRecorded,
    /// An object of one device was used with another.
    #[error(transparent)]
    WrongDevice(#[from] Box<WrongDevice>),
    /// A tagged event's tag is already in use.
    #[error("tagged event tag {0:?} is already in use")]
    TagInUse(String),
    /// No tagged event has this tag.
    #[error("no tagged event has tag {0:?}")]
    UnknownTag(String),
    /// A tagged stream was asked for with a priority other than the one it was created with.
    #[error("tagged stream {tag:?} exists with priority {existing}, asked for {requested}")]
    TagPriorityMismatch {
        /// The tag.
        tag: String,
        /// Priority it was created with.
        existing: i32,
        /// Priority requested now.
        requested: i32,
    },
    /// A copy or access outside the memory it names.
    #[error("{what}: {len} bytes at offset {offset} do not fit in {capacity} bytes")]
    OutOfBounds {
        /// What was accessed.
        what: &'static str,
        /// Offset of the access.
        offset: u64,
        /// Length of the access.
        len: u64,
        /// Size of the memory.
        capacity: u64,
    },
    /// Host data was read before the copy producing it was known complete.
    #[error("the device-to-host copy has not completed: synchronize its stream or call wait()")]
    NotReady,
    /// The workspace provider could not provide the workspace.
    #[error("workspace of {bytes} bytes unavailable: {reason}")]
    Workspace {
        /// Bytes asked for.
        bytes: u64,
        /// The provider's reason.
        reason: String,
    },
    /// A size that does not fit in the address space.
    #[error(transparent)]
    SizeOverflow(#[from] SizeOverflow),
    /// A task group begun on a stream that is not capturing.
    #[error("task group on {stream}, which is not capturing: begin a capture on it first (task groups mark captured operators)")]
    TaskGroupOutsideCapture {
        /// The stream.
        stream: StreamId,
    },
    /// A task group begun while one (or an update) is already open on the stream.
    #[error(
        "{stream} already has an open task group or update: end it first (task groups do not nest)"
    )]
    TaskGroupAlreadyOpen {
        /// The stream.
        stream: StreamId,
    },
    /// A task group ended on a stream that has none open.
    #[error("no task group is open on {stream}: call Stream::begin_task_group first")]
    NoOpenTaskGroup {
        /// The stream.
        stream: StreamId,
    },
    /// Work other than an operator (a copy, a memset, an event) inside a task group or an
    /// update scope.
    #[error("{call} on {stream} inside a task group or update: groups hold operators only (kernels, user operators, collectives); issue it outside the group")]
    NotAnOperatorInTaskGroup {
        /// The call refused.
        call: &'static str,
        /// The stream.
        stream: StreamId,
    },
    /// A task group handle used with a graph other than the one whose capture made it.
    #[error("the task group belongs to capture {group_capture} of {group_device}, not to this graph (capture {graph_capture} of {graph_device}): update the graph the group was captured in")]
    TaskGroupOfOtherGraph {
        /// The group's device.
        group_device: DeviceId,
        /// The capture that made the group.
        group_capture: u64,
        /// The graph's device.
        graph_device: DeviceId,
        /// The capture that made the graph.
        graph_capture: u64,
    },
    /// An update whose operators differ from the group's: nothing changed, unless the whole
    /// group had been re-issued before (an extra operator), which then stands.
    #[error("task update differs from the group at operator {index}: {difference}")]
    TaskUpdateMismatch {
        /// Index of the operator in the group (the group's length for a missing or extra one).
        index: usize,
        /// What differs: kind, count, data type or shape, with the group's and the update's.
        difference: String,
    },
    /// A capture ended while a task group was still open on one of its streams: the capture
    /// is discarded (as for [`StreamError::UnjoinedStream`]) and every stream is back to eager
    /// work; the group, whose end was never marked, is gone with it.
    #[error("the capture of {origin} ended while a task group was still open on {stream}: call Stream::end_task_group on {stream} before Stream::end_capture (the capture was discarded)")]
    TaskGroupOpenAtCaptureEnd {
        /// The stream with the open group.
        stream: StreamId,
        /// The capture's origin stream.
        origin: StreamId,
    },
    /// A graph launch refused because an update of the graph names memory whose buffer was
    /// dropped: the replay would compute into, or from, memory its owner gave up (the
    /// memory is held for the graph, not handed to another buffer). Nothing was enqueued.
    #[error("the graph's update names {len} bytes at {addr:#x}, whose buffer was dropped: update the task group with a live buffer (Graph::update) or drop the graph; nothing was launched")]
    GraphUsesDroppedBuffer {
        /// First byte of the dropped buffer's block.
        addr: u64,
        /// Its length.
        len: u64,
    },
    /// A graph launch refused because the graph's work (captured or updated) uses memory of a
    /// sleeping pool (`braid_allocator::CachingAllocator::sleep`). Nothing was enqueued.
    #[error("the graph uses {len} bytes at {addr:#x} of a pool tagged '{tag}' that is asleep: wake(\"{tag}\") before launching it; nothing was launched")]
    GraphMemoryAsleep {
        /// First byte of the sleeping block the graph uses.
        addr: u64,
        /// Its length.
        len: u64,
        /// The tag of its pool.
        tag: String,
    },
    /// An update of a graph a launch of which the host has not yet observed complete.
    #[error("graph update refused: a launch of the graph on {stream} may still be running; synchronize the stream (or an event recorded after the launch) before updating")]
    UpdateWhileLaunchInFlight {
        /// A stream with a launch in flight.
        stream: StreamId,
    },
}

/// An object of one device passed to a call that works on another: the one shape of every
/// `WrongDevice` error in braid ([`StreamError::WrongDevice`], the allocator's, graph
/// capture's and the collectives'), boxed in each so the errors stay small.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{call} on {expected}: the {what} belongs to {found}")]
pub struct WrongDevice {
    /// The call refused (`Event::record`, `alloc`, `CaptureSession::run`), with whose call it
    /// is where that names it (`allreduce(sum) of rank 1`).
    pub call: Cow<'static, str>,
    /// What was passed (`stream`, `event`, ...).
    pub what: &'static str,
    /// The device the call works on (the event's, the allocator's, the capture's, the rank's).
    pub expected: DeviceId,
    /// The device of what was passed.
    pub found: DeviceId,
}

/// A size that overflows the integer it is computed in: the one shape of every
/// `SizeOverflow` error in braid ([`StreamError::SizeOverflow`], the allocator's and the
/// collectives').
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{call}: the size of {what} overflows")]
pub struct SizeOverflow {
    /// The call refused (`copy_d2h`, `alloc`, `allgather`, ...).
    pub call: &'static str,
    /// What was sized, with the numbers it was computed from (bytes rounded to a block, a
    /// count of elements of a type, over some ranks): they differ from call to call.
    pub what: String,
}

/// Work on one device's stream used memory of another device without a peer relation
/// ([`StreamError::ForeignMemory`]).
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
#[error("{work} on a stream of {stream_device} uses {range}, memory of {memory_device}: enable peer access from {stream_device} to {memory_device} first (Device::enable_peer_access)")]
pub struct ForeignMemory {
    /// The kernel, operator, copy or memset.
    pub work: String,
    /// The range.
    pub range: DeviceSlice,
    /// The device of the stream the work was submitted to.
    pub stream_device: DeviceId,
    /// The device that owns the memory.
    pub memory_device: DeviceId,
}

/// Result with the front layer's [`StreamError`].
pub type Result<T, E = StreamError> = std::result::Result<T, E>;

/// The backend's error; its typed IPC refusals ([`HalError::Ipc`]) are the front layer's
/// [`StreamError::Ipc`], whichever call met them (an import, or a wait on another process's
/// event).
impl From<HalError> for StreamError {
    fn from(err: HalError) -> Self {
        match err {
            HalError::Ipc(ipc) => StreamError::Ipc(*ipc),
            other => StreamError::Backend(other),
        }
    }
}
