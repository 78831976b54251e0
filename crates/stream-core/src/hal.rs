//! The backend interface: thin, unvalidated traits a device backend implements.
//!
//! In the style of wgpu-hal, one [`Backend`] type ties the associated device, stream, event and
//! graph types together, and everything is statically dispatched. Backends keep no ordering
//! state and check nothing beyond what they need to stay memory safe: all the meaning (the
//! happens-before model, capture rules, typed misuse errors) lives once, in the front layer
//! ([`crate::Device`], [`crate::Stream`], [`crate::Event`], [`crate::Graph`]).
//!
//! Work reaches a backend lowered: a built-in kernel prepared in two phases
//! ([`Stream::prepare`], [`Stream::launch_prepared`]), a user operator as an [`Operator`]
//! ([`Stream::launch_operator`]), a rank's part of a collective through the collective
//! extension ([`CollectiveBackend`], implemented by the backends that run collectives). The
//! hal knows nothing of the front layer's types. [`noop`] is a backend implementing every
//! trait while running nothing, for tests.

mod collectives;
pub mod noop;
mod operator;
mod task_group;

pub use collectives::{CollectiveBackend, Comm};
pub use operator::{OpCost, OpRange, Operator};
pub use task_group::TaskGroupHandle;

use crate::collective::{Incomplete, MatchError, Mismatch};
use crate::kernel::TypedKernel;
use crate::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority,
};

/// Errors a backend reports. Out of memory is distinct so the allocator can run its ladder.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum HalError {
    /// The device could not provide the requested bytes.
    #[error("device out of memory: requested {requested} bytes, {free} of {total} bytes free")]
    OutOfMemory {
        /// Bytes requested.
        requested: u64,
        /// Bytes free on the device at the time.
        free: u64,
        /// Device capacity.
        total: u64,
    },
    /// Computing a kernel would need more host memory than the host has (a simulator in data
    /// mode computes on the host): refused at its launch, before anything is allocated.
    #[error(
        "host out of memory: {kernel} needs {needed} bytes of host memory to compute, more than the host's {available}"
    )]
    HostOutOfMemory {
        /// The kernel, with its operands' shapes.
        kernel: String,
        /// Host bytes computing it needs.
        needed: u64,
        /// Host bytes there are.
        available: u64,
    },
    /// The host cannot back more simulated device memory: a simulator in data mode keeps
    /// every device's bytes in host memory and refuses an allocation that would take the
    /// process past its host-memory budget, before the host runs out.
    #[error("the host cannot back {requested} more bytes of simulated device memory: {in_use} bytes of the {budget}-byte host-memory budget are in use (raise it with {setting}, or use less device memory)")]
    HostMemoryExhausted {
        /// Bytes requested.
        requested: u64,
        /// Bytes of simulated device memory the host already backs.
        in_use: u64,
        /// The budget.
        budget: u64,
        /// The setting that changes the budget.
        setting: &'static str,
    },
    /// A parameter the backend cannot accept.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The backend does not support the operation.
    #[error("operation not supported by this backend: {0}")]
    Unsupported(&'static str),
    /// The backend cannot run this operator (its native library lacks the operator, or the
    /// operator has no native equivalent), named with what is missing.
    #[error("operator not available on this backend: {0}")]
    UnsupportedOperator(String),
    /// A wait the capture rule refuses ([`crate::capture_rule`]); a backend over a native
    /// runtime translates it into that runtime's code.
    #[error("wait refused: the event was {}", .0.reason())]
    CaptureRefused(crate::capture_rule::WaitRefusal),
    /// An error code from the native runtime, with its name and message.
    #[error("{name} ({code}): {message}")]
    Native {
        /// Native error number.
        code: i32,
        /// Symbolic name of the code.
        name: &'static str,
        /// Text the runtime gave.
        message: String,
    },
    /// A rank's part of a collective that does not match the other ranks' parts of the same
    /// call (a backend that matches the parts itself, as the simulator does, with the one
    /// [`Matcher`](crate::collective::Matcher)): a refused argument, typed.
    #[error(transparent)]
    CollectiveMismatch(Box<Mismatch>),
    /// A host wait on a collective that some ranks have not issued (a backend that holds a
    /// rank's stream back until every part is in, as the simulator does): it would wait
    /// forever, so it fails naming the missing ranks.
    #[error(transparent)]
    CollectiveIncomplete(Box<Incomplete>),
    /// A typed refusal of sharing between processes ([`crate::ipc::IpcError`]): a backend
    /// that shares through host files (the simulator) says this way that a file is unusable,
    /// that its directory is full, or that the exporting process ended. The front layer
    /// reports it as `StreamError::Ipc`.
    #[error(transparent)]
    Ipc(Box<crate::ipc::IpcError>),
    /// The native runtime refused a parameter (HCCL's `HCCL_E_PARA`): a refused argument, as
    /// [`HalError::InvalidArgument`], that keeps the runtime's code, name and message.
    #[error("{name} ({code}): {message}")]
    NativeInvalidArgument {
        /// Native error number.
        code: i32,
        /// Symbolic name of the code.
        name: &'static str,
        /// Text the runtime gave.
        message: String,
    },
}

impl HalError {
    /// Whether the backend refused an argument (rather than failing to do what it was
    /// asked): [`HalError::InvalidArgument`], [`HalError::NativeInvalidArgument`] or
    /// [`HalError::CollectiveMismatch`].
    pub fn is_invalid_argument(&self) -> bool {
        matches!(
            self,
            HalError::InvalidArgument(_)
                | HalError::NativeInvalidArgument { .. }
                | HalError::CollectiveMismatch(_)
        )
    }
}

/// A part the matcher refuses: a mismatch as [`HalError::CollectiveMismatch`], a rank the
/// communicator does not have as an invalid argument.
impl From<MatchError> for HalError {
    fn from(err: MatchError) -> Self {
        match err {
            MatchError::Mismatch(m) => HalError::CollectiveMismatch(m),
            other => HalError::InvalidArgument(other.to_string()),
        }
    }
}

/// The streams alive on a device against the runtime's limit ([`Device::stream_budget`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StreamBudget {
    /// Streams alive: the default stream, every stream created and not destroyed, and the
    /// streams captured graphs hold.
    pub live: u32,
    /// The most the runtime allows at once (1984 on an Atlas A2/A3 device).
    pub limit: u32,
}

/// A page-run call ([`Device::map_physical_pages`], [`Device::unmap_physical_pages`]) that
/// stopped at a failing page: the pages done before it stay done.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{error} (after {done} page(s) of the run)")]
pub struct PageRunError {
    /// Pages mapped (or unmapped) before the failure.
    pub done: u64,
    /// Why the next page failed.
    pub error: HalError,
}

/// The address of page `i` of a run of pages of `page` bytes from `at` (for the page-run
/// calls of [`Device`]); an invalid argument past the end of the address space.
pub fn page_of_run(at: DevicePtr, page: u64, i: u64) -> Result<DevicePtr, HalError> {
    i.checked_mul(page)
        .and_then(|off| at.0.checked_add(off))
        .map(DevicePtr)
        .ok_or_else(|| {
            HalError::InvalidArgument(format!(
                "page {i} of a run of {page}-byte pages at {at} is past the address space"
            ))
        })
}

/// Ties a backend's types together.
pub trait Backend: Sized + Send + Sync + 'static {
    /// A device (one accelerator).
    type Device: Device<B = Self>;
    /// A stream of work on a device.
    type Stream: Stream<B = Self>;
    /// A marker in a stream's work.
    type Event: Event<B = Self>;
    /// A captured, replayable graph of work.
    type Graph: Graph<B = Self>;
    /// A built-in kernel prepared for launch ([`Stream::prepare`]): it knows the device
    /// workspace it needs. The simulator's is the kernel itself (no workspace); ACL's holds the
    /// aclnn executor.
    type Prepared: PreparedLaunch;
    /// How this backend runs a user-defined operator ([`Operator::body`]): a host function on
    /// the simulator, a closure handed the native stream on ACL.
    type OpBody: ?Sized + Send + Sync + 'static;
    /// Name shown in logs, errors and tables.
    const NAME: &'static str;
}

/// A kernel launch prepared in two phases ([`Stream::prepare`], then
/// [`Stream::launch_prepared`]), so the front layer can take workspace memory in between
/// without holding any lock. Dropping it unlaunched releases what it holds.
pub trait PreparedLaunch: Send + 'static {
    /// Bytes of device workspace the launch needs (0: none).
    fn workspace_size(&self) -> u64;
}

/// A kernel launch that needs no workspace: backends without a preparation phase (the
/// simulator) prepare a kernel as itself.
impl PreparedLaunch for TypedKernel {
    fn workspace_size(&self) -> u64 {
        0
    }
}

/// One accelerator.
pub trait Device: Send + Sync + 'static {
    /// The backend.
    type B: Backend<Device = Self>;

    /// Ordinal of the device on this host.
    fn ordinal(&self) -> u32;

    /// A handle to the device's default stream.
    fn default_stream(&self) -> Result<<Self::B as Backend>::Stream, HalError>;

    /// Creates a stream with the given priority (smaller is higher, 0 is normal).
    fn create_stream(&self, priority: Priority) -> Result<<Self::B as Backend>::Stream, HalError>;

    /// Creates an event.
    fn create_event(&self, flags: EventFlags) -> Result<<Self::B as Backend>::Event, HalError>;

    /// Allocates a segment of device memory. Out of memory is [`HalError::OutOfMemory`].
    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError>;

    /// Returns a segment to the device.
    ///
    /// # Safety
    /// `ptr` came from [`Device::alloc`] on this device and was not freed; no queued or captured
    /// work that is still to run uses it (or the caller accepts that such work sees freed memory).
    unsafe fn free(&self, ptr: DevicePtr) -> Result<(), HalError>;

    /// Allocates `size` bytes of page-locked (pinned) host memory that asynchronous copies may
    /// read and write (`cudaHostAlloc`, `aclrtMallocHost`), aligned to at least 64 bytes. Out of
    /// host memory is [`HalError::OutOfMemory`]. The default is [`HalError::Unsupported`].
    fn alloc_host(&self, size: u64) -> Result<HostPtr, HalError> {
        let _ = size;
        Err(HalError::Unsupported("alloc_host"))
    }

    /// Returns pinned host memory to the device. The default is [`HalError::Unsupported`].
    ///
    /// # Safety
    /// `ptr` came from [`Device::alloc_host`] on this device and was not freed; no queued or
    /// captured work that is still to run reads or writes it, and no host reference into it
    /// outlives the call.
    unsafe fn free_host(&self, ptr: HostPtr) -> Result<(), HalError> {
        let _ = ptr;
        Err(HalError::Unsupported("free_host"))
    }

    /// Free and total device memory.
    fn mem_info(&self) -> Result<MemInfo, HalError>;

    /// Whether every byte of `range` is live device memory of this device (inside an allocated
    /// segment or a mapped page), or `None` when the backend cannot tell. The front layer
    /// refuses work on ranges answered `Some(false)`. The default is `None`.
    fn is_live(&self, range: DeviceSlice) -> Option<bool> {
        let _ = range;
        None
    }

    /// Page size of the virtual-memory API (reserve an address range, map physical memory
    /// into it on demand), or `None` when the backend has none. Sizes and offsets passed to
    /// [`Device::reserve_address`], [`Device::map_physical`] and [`Device::unmap_physical`]
    /// are multiples of it. The default is `None`.
    fn vmm_granularity(&self) -> Option<u64> {
        None
    }

    /// Reserves `size` bytes of device address space, backed by no memory: it takes no
    /// capacity, and accesses to it are invalid until memory is mapped with
    /// [`Device::map_physical`]. The default is [`HalError::Unsupported`].
    fn reserve_address(&self, size: u64) -> Result<DevicePtr, HalError> {
        let _ = size;
        Err(HalError::Unsupported("virtual memory (reserve_address)"))
    }

    /// Returns an address range reserved by [`Device::reserve_address`]; nothing may be
    /// mapped in it any more. The default is [`HalError::Unsupported`].
    ///
    /// # Safety
    /// `ptr` came from [`Device::reserve_address`] on this device and was not released; no
    /// queued or captured work that is still to run uses the range.
    unsafe fn release_address(&self, ptr: DevicePtr) -> Result<(), HalError> {
        let _ = ptr;
        Err(HalError::Unsupported("virtual memory (release_address)"))
    }

    /// Allocates `size` bytes of physical memory and maps them at `at`, inside a reserved
    /// range where nothing is mapped yet. The bytes count against the capacity like
    /// [`Device::alloc`]; when the device cannot provide them the error is
    /// [`HalError::OutOfMemory`] and nothing is mapped. A later mapping right after this one
    /// makes one contiguous range (accesses may cross mappings). The default is
    /// [`HalError::Unsupported`].
    fn map_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let _ = (at, size);
        Err(HalError::Unsupported("virtual memory (map_physical)"))
    }

    /// Unmaps the mapping made by [`Device::map_physical`] at `at` of `size` bytes and frees
    /// its physical memory; the range stays reserved. The default is
    /// [`HalError::Unsupported`].
    ///
    /// # Safety
    /// `at` and `size` are exactly those of one live mapping on this device; no queued or
    /// captured work that is still to run uses it (its contents are lost).
    unsafe fn unmap_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        let _ = (at, size);
        Err(HalError::Unsupported("virtual memory (unmap_physical)"))
    }

    /// Maps `count` pages of `page` bytes at `at`, `at + page`, ...: the same as calling
    /// [`Device::map_physical`] for each page in address order, stopping at the first
    /// failure (returned with the number of pages mapped before it, which stay mapped). Each
    /// page is a mapping of its own, for [`Device::unmap_physical`] to unmap alone. Backends
    /// whose bookkeeping can map a run at once override it; the default maps page by page.
    fn map_physical_pages(&self, at: DevicePtr, page: u64, count: u64) -> Result<(), PageRunError> {
        for done in 0..count {
            let fail = |error| PageRunError { done, error };
            self.map_physical(page_of_run(at, page, done).map_err(fail)?, page)
                .map_err(fail)?;
        }
        Ok(())
    }

    /// Unmaps `count` pages of `page` bytes at `at`, `at + page`, ..., each one mapping made by
    /// [`Device::map_physical`] or [`Device::map_physical_pages`]: the same as calling
    /// [`Device::unmap_physical`] for each page, from the last one down, stopping at the first
    /// failure (returned with the number of pages unmapped before it: the run's last ones).
    /// The default unmaps page by page.
    ///
    /// # Safety
    /// As for [`Device::unmap_physical`], for every page of the run.
    unsafe fn unmap_physical_pages(
        &self,
        at: DevicePtr,
        page: u64,
        count: u64,
    ) -> Result<(), PageRunError> {
        for done in 0..count {
            let fail = |error| PageRunError { done, error };
            let ptr = page_of_run(at, page, count - 1 - done).map_err(fail)?;
            // SAFETY: the caller vouches for every page of the run.
            unsafe { self.unmap_physical(ptr, page) }.map_err(fail)?;
        }
        Ok(())
    }

    /// Whether this device can access `peer`'s memory (copies and kernels on this device's
    /// streams reading or writing it) once [`Device::enable_peer_access`] is called. The
    /// default is `false`.
    fn can_access_peer(&self, peer: &Self) -> Result<bool, HalError> {
        let _ = peer;
        Ok(false)
    }

    /// Lets this device's streams access `peer`'s memory (`aclrtDeviceEnablePeerAccess`,
    /// `cudaDeviceEnablePeerAccess`); one direction only. The default is
    /// [`HalError::Unsupported`].
    fn enable_peer_access(&self, peer: &Self) -> Result<(), HalError> {
        let _ = peer;
        Err(HalError::Unsupported("peer access"))
    }

    /// Blocks until all work on all streams is done.
    fn synchronize(&self) -> Result<(), HalError>;

    /// Sets the calling thread's capture mode in the native runtime
    /// (`aclmdlRICaptureThreadExchangeMode`), for backends whose runtime enforces capture modes
    /// itself; the front layer keeps the mode and applies the rule
    /// ([`crate::capture_mode`]). The default does nothing.
    fn set_thread_capture_mode(&self, mode: CaptureMode) -> Result<(), HalError> {
        let _ = mode;
        Ok(())
    }

    /// The streams alive on the device and how many the runtime allows, where the backend
    /// knows both exactly; the front layer turns a failed stream creation or capture into
    /// [`crate::StreamError::StreamsExhausted`] when `live` has reached `limit`. The default is
    /// `None`.
    fn stream_budget(&self) -> Option<StreamBudget> {
        None
    }

    // Sharing with other processes (`crate::ipc`); each default is `Unsupported`.

    /// The calling process's id as the backend's IPC allow-lists take it
    /// (`aclrtDeviceGetBareTgid`). The default is the operating system's process id.
    fn process_id(&self) -> Result<i32, HalError> {
        i32::try_from(std::process::id())
            .map_err(|_| HalError::InvalidArgument("the process id does not fit in an i32".into()))
    }

    /// Shares `range` (device memory of this device, in one allocation) with other
    /// processes under a new key (`aclrtIpcMemGetExportKey`); `allow_list`: only processes
    /// added with [`Device::ipc_allow_pids`] may import it.
    fn ipc_export(&self, range: DeviceSlice, allow_list: bool) -> Result<String, HalError> {
        let _ = (range, allow_list);
        Err(HalError::Unsupported(
            "sharing memory between processes (ipc_export)",
        ))
    }

    /// Adds processes to the allow-list of this process's export `key`
    /// (`aclrtIpcMemSetImportPid`).
    fn ipc_allow_pids(&self, key: &str, pids: &[i32]) -> Result<(), HalError> {
        let _ = (key, pids);
        Err(HalError::Unsupported(
            "sharing memory between processes (ipc_allow_pids)",
        ))
    }

    /// Maps the memory another process exported under `key` into this device
    /// (`aclrtIpcMemImportByKey`): its address, and its size where the backend knows it.
    fn ipc_import(&self, key: &str) -> Result<(DevicePtr, Option<u64>), HalError> {
        let _ = key;
        Err(HalError::Unsupported(
            "sharing memory between processes (ipc_import)",
        ))
    }

    /// Closes `key` in this process (`aclrtIpcMemClose`): an import is unmapped, an export
    /// takes no new imports.
    ///
    /// # Safety
    /// For an import: no queued or captured work that is still to run uses its memory.
    unsafe fn ipc_close(&self, key: &str) -> Result<(), HalError> {
        let _ = key;
        Err(HalError::Unsupported(
            "sharing memory between processes (ipc_close)",
        ))
    }

    /// Creates an event other processes may wait on (`aclrtCreateEventExWithFlag` with
    /// `ACL_EVENT_IPC`).
    fn create_ipc_event(&self) -> Result<<Self::B as Backend>::Event, HalError> {
        Err(HalError::Unsupported(
            "sharing events between processes (create_ipc_event)",
        ))
    }

    /// The handle of an event made by [`Device::create_ipc_event`]
    /// (`aclrtIpcGetEventHandle`).
    fn ipc_event_handle(
        &self,
        event: &<Self::B as Backend>::Event,
    ) -> Result<[u8; crate::ipc::IPC_EVENT_HANDLE_BYTES], HalError> {
        let _ = event;
        Err(HalError::Unsupported(
            "sharing events between processes (ipc_event_handle)",
        ))
    }

    /// Opens the event of another process that `handle` names (`aclrtIpcOpenEventHandle`).
    fn open_ipc_event(
        &self,
        handle: &[u8; crate::ipc::IPC_EVENT_HANDLE_BYTES],
    ) -> Result<<Self::B as Backend>::Event, HalError> {
        let _ = handle;
        Err(HalError::Unsupported(
            "sharing events between processes (open_ipc_event)",
        ))
    }

    /// Whether the backend uses [`Device::note_sub_alloc`] / [`Device::note_sub_free`] (a
    /// sub-allocator may skip the calls otherwise). The default is `false`.
    fn wants_sub_allocation_notes(&self) -> bool {
        false
    }

    /// A sub-allocator (the caching allocator, working inside segments) handed `range` to a new
    /// user whose first stream is `stream`. Backends with a memory checker use this to see
    /// blocks reused inside a segment; the default does nothing.
    fn note_sub_alloc(
        &self,
        range: DeviceSlice,
        stream: &<Self::B as Backend>::Stream,
    ) -> Result<(), HalError> {
        let _ = (range, stream);
        Ok(())
    }

    /// A sub-allocator took back `range` (exactly as given to [`Device::note_sub_alloc`]) at
    /// `stream`'s current position; until it is handed out again, accesses to it are uses
    /// after free. The default does nothing.
    fn note_sub_free(
        &self,
        range: DeviceSlice,
        stream: &<Self::B as Backend>::Stream,
    ) -> Result<(), HalError> {
        let _ = (range, stream);
        Ok(())
    }
}

/// A FIFO of device work.
pub trait Stream: Send + Sync + 'static {
    /// The backend.
    type B: Backend<Stream = Self>;

    /// First phase of a built-in kernel launch: checks the kernel and prepares it in its data
    /// type (on ACL: the aclnn operator's `GetWorkspaceSize`, which creates its executor),
    /// enqueuing nothing. A kernel the backend has no operator for is
    /// [`HalError::Unsupported`].
    fn prepare(&self, kernel: &TypedKernel) -> Result<<Self::B as Backend>::Prepared, HalError>;

    /// Second phase: enqueues a prepared kernel. `workspace` holds at least
    /// [`PreparedLaunch::workspace_size`] bytes of device memory that stay reserved for this
    /// launch in stream order (`None` when the size is 0). `label` names it in timelines and
    /// reports.
    fn launch_prepared(
        &self,
        prepared: <Self::B as Backend>::Prepared,
        workspace: Option<DeviceSlice>,
        label: &str,
    ) -> Result<(), HalError>;

    /// Enqueues a built-in kernel that needs no workspace: [`Stream::prepare`] then
    /// [`Stream::launch_prepared`]. A kernel that asks for workspace is
    /// [`HalError::InvalidArgument`] and nothing is enqueued (the front layer's launch provides
    /// workspace).
    fn launch(&self, kernel: &TypedKernel, label: &str) -> Result<(), HalError> {
        let prepared = self.prepare(kernel)?;
        let needed = prepared.workspace_size();
        if needed > 0 {
            return Err(HalError::InvalidArgument(format!(
                "{} needs {needed} bytes of workspace: launch it through the front layer",
                kernel.name()
            )));
        }
        self.launch_prepared(prepared, None, label)
    }

    /// Enqueues a user-defined operator, lowered and validated by the front layer. A backend
    /// that cannot run it (no body for this backend) answers [`HalError::Unsupported`] or
    /// [`HalError::InvalidArgument`] and enqueues nothing.
    fn launch_operator(&self, op: &Operator<'_, Self::B>) -> Result<(), HalError>;

    /// Enqueues a copy of `len` bytes from host memory to the device.
    ///
    /// # Safety
    /// `src` is valid for reads of `len` bytes and unchanged until the copy has run (until a host
    /// observation of its completion, or for captured copies until the graph is destroyed).
    unsafe fn memcpy_h2d(&self, dst: DevicePtr, src: *const u8, len: u64) -> Result<(), HalError>;

    /// Enqueues a copy of `len` bytes from the device into host memory.
    ///
    /// # Safety
    /// `dst` is valid for writes of `len` bytes, and the host neither reads nor writes it until a
    /// host observation of the copy's completion.
    unsafe fn memcpy_d2h(&self, dst: *mut u8, src: DevicePtr, len: u64) -> Result<(), HalError>;

    /// Enqueues a device-to-device copy.
    fn memcpy_d2d(&self, dst: DevicePtr, src: DevicePtr, len: u64) -> Result<(), HalError>;

    /// Enqueues a memset of `len` bytes to `value`.
    fn memset(&self, dst: DevicePtr, value: u8, len: u64) -> Result<(), HalError>;

    /// Records `event` at the stream's current position.
    fn record(&self, event: &<Self::B as Backend>::Event) -> Result<(), HalError>;

    /// Makes later work on this stream wait for `event`'s last record.
    fn wait(&self, event: &<Self::B as Backend>::Event) -> Result<(), HalError>;

    /// Blocks the host until all work on the stream is done.
    fn synchronize(&self) -> Result<(), HalError>;

    /// Whether all work on the stream is done.
    fn query(&self) -> Result<bool, HalError>;

    /// Starts capturing work on this stream into a graph instead of running it.
    fn begin_capture(&self, mode: CaptureMode) -> Result<(), HalError>;

    /// Ends the capture started on this stream and returns the graph.
    fn end_capture(&self) -> Result<<Self::B as Backend>::Graph, HalError>;

    /// Whether the stream is capturing.
    fn capture_status(&self) -> Result<CaptureStatus, HalError>;

    /// Opens a task group on this capturing stream: the operators captured on it until
    /// [`Stream::end_task_group`] form a group an update can re-issue. The default refuses.
    fn begin_task_group(&self) -> Result<(), HalError> {
        Err(HalError::Unsupported("task groups (begin_task_group)"))
    }

    /// Closes the task group open on this stream and returns its handle. The default refuses.
    fn end_task_group(&self) -> Result<TaskGroupHandle, HalError> {
        Err(HalError::Unsupported("task groups (end_task_group)"))
    }

    /// Begins re-issuing `group` on this (eager) stream: the operators submitted until
    /// [`Stream::end_task_update`] replace the group's, in order, instead of running. The
    /// default refuses.
    fn begin_task_update(&self, group: TaskGroupHandle) -> Result<(), HalError> {
        let _ = group;
        Err(HalError::Unsupported("task groups (begin_task_update)"))
    }

    /// Ends the update begun on this stream. With `commit`, the group's operators are
    /// replaced when exactly as many were re-issued as the group holds, each of the same kind;
    /// otherwise nothing changes and the update is refused. Without `commit` (the front layer
    /// refused one of the re-issued operators), the re-issued operators are discarded and
    /// nothing changes. The default refuses.
    fn end_task_update(&self, commit: bool) -> Result<(), HalError> {
        let _ = commit;
        Err(HalError::Unsupported("task groups (end_task_update)"))
    }

    /// The front layer made this stream the tagged stream `tag` (TorchAir's
    /// `npu_stream_switch`); backends with a race detector name it in reports. The default
    /// does nothing.
    fn set_tag(&self, tag: &str) {
        let _ = tag;
    }
}

/// A marker in a stream's work.
pub trait Event: Send + Sync + 'static {
    /// The backend.
    type B: Backend<Event = Self>;

    /// Whether the work before the last record is done (true if never recorded).
    fn query(&self) -> Result<bool, HalError>;

    /// Blocks the host until the work before the last record is done.
    fn synchronize(&self) -> Result<(), HalError>;

    /// Milliseconds between this event and `end`; both recorded with timing and complete.
    fn elapsed_ms(&self, end: &Self) -> Result<f32, HalError>;
}

/// A captured graph of work.
pub trait Graph: Send + Sync + 'static {
    /// The backend.
    type B: Backend<Graph = Self>;

    /// Enqueues one replay of the graph on `stream`.
    fn launch(&self, stream: &<Self::B as Backend>::Stream) -> Result<(), HalError>;

    /// Number of work nodes in the graph.
    fn node_count(&self) -> usize;
}
