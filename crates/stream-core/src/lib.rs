//! braid's backend interface and front layer.
//!
//! - [`hal`]: the thin, unvalidated traits a backend implements (`Backend` with associated
//!   `Device`, `Stream`, `Event`, `Graph` types), in the style of wgpu-hal.
//! - The front types [`Device`], [`Stream`], [`Event`], [`Graph`] wrap a backend and carry the
//!   one model of ordering the whole project uses: a happens-before relation kept as vector
//!   clocks ([`ordering`]). Anyone can ask whether a use of memory on one stream is ordered
//!   before the next work on another ([`Device::is_ordered_before`]); the allocator frees across
//!   streams with it, graph capture reuses memory and checks joins with it.
//! - The model spans every device of the process: a position names its device
//!   ([`StreamPosition::device`]); an event recorded on one device's stream can be waited on
//!   by another device's stream ([`Stream::wait`]), which is then ordered after that work;
//!   [`Device::is_ordered_before`] and [`Device::is_complete`] answer across devices. Host
//!   synchronization of one device orders only that device's work, plus whatever other
//!   devices' work the observed work was ordered after. Captures stay per device. A device's
//!   streams use another device's memory only after [`Device::enable_peer_access`]
//!   (kernels, operators, copies, memsets, [`Stream::copy_peer`]); otherwise a typed
//!   [`StreamError::ForeignMemory`] names both devices, and the owning device's use observers see
//!   the uses made from the other device's streams. [`ordering`] explains the clocks.
//! - Many host threads may drive one device: launches, records and waits on different streams
//!   never wait for each other's backend calls, and the model stays exact. [`sync`] lists the
//!   locks that remain and the one order they are taken in.
//! - The current-stream context ([`Device::use_stream`]), tagged streams and events
//!   ([`Device::stream_switch`], [`Device::create_tagged_event`]) and the capture rules, each
//!   with a typed [`StreamError`].
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | [`hal`] | the backend traits; start here to write a backend |
//! | `device`, `stream`, `event`, `graph` | the front types; start with [`Device`] |
//! | [`ordering`], [`clock`] | the happens-before model as vector clocks; capture domains |
//! | [`capture_rule`], [`capture_mode`] | which waits a capture refuses; capture modes per thread and which calls they refuse |
//! | `state` | per-device state under one lock: ordering, capture rules, tags |
//! | `context` | the per-thread current-stream stack ([`StreamGuard`]) |
//! | [`kernel`], [`custom`], [`dtype`] | built-in kernels, user operators ([`CustomOp`]), data types |
//! | [`ops`], [`tensor`] | tensor operators ([`TensorOp`]: declared once, run by every backend) over [`Tensor`] views |
//! | [`collective`], `buffer` | collective calls as values and the one call matcher (for backends and `braid-collective`); [`CollectiveBuffer`] |
//! | [`deadline`] | deadlines from timeouts that saturate (`Duration::MAX` waits for ever) |
//! | `uses` | use observers (how the allocator's automatic mode sees every use) |
//! | [`ipc`] | sharing memory and events with other processes |
//! | [`stream_pool`] | reusable streams for captures and tags; running out of streams |
//! | `peer`, `registry` | several devices: lookup by uid, host knowledge across devices, peer access, foreign memory |
//! | `memory`, [`types`], [`error`] | raw device memory and host readbacks; value types; errors |
//! | [`task_group`] | task groups: captured operators re-issued with new parameters ([`Graph::update`]) |
//! | [`graph_hold`] | what a graph keeps for the memory its captured and updated work uses, asked before each launch |
//! | [`dry_run`] | fences a thread to one device while a dry run plans on it |
//!
//! ```
//! # fn demo<B: braid_stream_core::hal::Backend>(device: braid_stream_core::Device<B>) -> braid_stream_core::Result<()> {
//! use braid_stream_core::{EventFlags, Kernel};
//! let side = device.create_stream(0)?;
//! let main = device.default_stream();
//! let buf = device.alloc(4096)?;
//! let pos = main.launch(&Kernel::Fill { dst: buf.slice(), value: 1.0 })?;
//! assert!(!device.is_ordered_before(pos, &side));
//! side.wait_stream(&main)?;
//! assert!(device.is_ordered_before(pos, &side));
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

mod buffer;
pub mod capture_mode;
pub mod capture_rule;
pub mod clock;
pub mod collective;
mod context;
pub mod custom;
pub mod deadline;
mod device;
pub mod dry_run;
pub mod dtype;
pub mod error;
mod event;
mod graph;
pub mod graph_hold;
pub mod hal;
pub mod ipc;
pub mod kernel;
mod lowered;
mod memory;
pub mod ops;
pub mod ordering;
mod peer;
mod registry;
mod state;
mod stream;
pub mod stream_pool;
pub mod sync;
pub mod task_group;
pub mod tensor;
pub mod types;
mod uses;
mod workspace;

pub use buffer::CollectiveBuffer;
pub use capture_mode::{thread_capture_mode, CaptureModeGuard};
pub use context::StreamGuard;
pub use custom::{CustomOp, OpError};
pub use device::Device;
pub use dtype::{DType, DTypeKind};
pub use error::{Result, SizeOverflow, StreamError, WrongDevice};
pub use event::{Event, EventWait};
pub use graph::Graph;
pub use graph_hold::GraphHold;
pub use hal::{OpCost, OpRange};
pub use ipc::{IpcError, IpcEventHandle, IpcMemKey, IpcMemory};
pub use kernel::{ComputeUnit, Kernel, KernelError, KernelUses, TypedKernel};
pub use memory::{f32_bytes, f32s_from_bytes, DeviceMemory, HostReadback};
pub use ops::{OpCheckError, OpKernel, OpSpec, TensorOp};
pub use ordering::{CaptureId, Domain, StreamPosition};
pub use stream::Stream;
pub use stream_pool::{PooledStream, StreamPoolStats};
pub use task_group::{OpSignature, TaskGroup};
pub use tensor::{Tensor, TensorError};
pub use types::{
    CaptureMode, CaptureStatus, DeviceId, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo,
    Priority, StreamId,
};
pub use uses::{Access, UseObserver};
pub use workspace::{Workspace, WorkspaceProvider};
