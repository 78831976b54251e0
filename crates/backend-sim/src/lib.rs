//! braid's simulated accelerator: a deterministic discrete-event simulator in virtual time.
//!
//! [`SimBackend`] implements the hal of [`braid_stream_core::hal`] with [`SimDevice`],
//! [`SimStream`], [`SimEvent`] and [`SimGraph`]. Nothing sleeps and nothing depends on the wall
//! clock: the same program gives the same timeline on every run.
//!
//! - **Profiles.** Every figure the cost model uses comes from a profile file, each number
//!   with its source ([`Profile`]): the shipped 910B / Atlas 800T A2 profile (the default)
//!   is calibrated to published measurements, and a device names its profile
//!   ([`DeviceProfile::name`]).
//! - **Host time.** Every hal call advances the device's host clock by a modelled cost
//!   ([`DeviceProfile`]): an eager enqueue by `eager_launch_ns`, other calls by
//!   `host_call_ns`, a graph launch by `graph_launch_ns + nodes * graph_node_ns`. Synchronize
//!   calls move the host clock up to the end of the awaited work.
//! - **Device time.** Work is scheduled when it is submitted: it is ready at the latest of the
//!   host time, the end of its stream's previous work and the events the stream waited on, and
//!   then takes the earliest slot on its resource at which the units it demands are free. The
//!   resources are the cube (matrix) units, the vector units and the copy engines, each with a
//!   capacity from the [`DeviceProfile`]; a matmul demands a cube unit per output tile, a vector
//!   op a vector unit per tile of memory, a copy one engine, and a kernel that gets only some
//!   of the units runs at their share of the peak (cube work further at the profile's
//!   efficiency for its size: small matmuls do not reach the peak). Two matmuls that each
//!   fill the cube units therefore serialize, smaller ones share, and a vector op or a copy
//!   overlaps a matmul.
//! - **Memory.** Real, never reused addresses; in [`SimMode::Data`] every allocation has host
//!   backing and kernels compute on their data type (`f32`, `f16`, `bf16`: arithmetic in `f32`,
//!   each stored result rounded to the type), each op reading its inputs at its start time and
//!   writing its outputs at its end time, so missing synchronization gives a deterministic wrong
//!   answer. [`SimMode::TimingOnly`] stores nothing.
//! - **Virtual memory.** `reserve_address` takes no capacity; `map_physical` maps fresh memory
//!   in a reservation, one mapping per call; `map_physical_pages` / `unmap_physical_pages` do
//!   a run of such pages in one call (see `memory::vmm`).
//! - **Pinned host memory.** `alloc_host` gives real, page-aligned, zeroed host memory from a
//!   capped supply ([`SimConfig::host_capacity`], counted in [`SimStats`]); `free_host` waits
//!   for the device's work first, as `cudaFreeHost` does. Pinned memory still allocated when
//!   the device's last handle drops is released then.
//! - **Capture.** Work submitted to a capturing stream becomes graph nodes with dependencies;
//!   [`SimGraph`] replays them at the captured addresses. Event records and waits inside a
//!   capture create no nodes: they carry dependencies between capturing streams (a stream that
//!   waits on an event recorded in a capture joins that capture). Which waits a capture
//!   refuses is braid's one rule (`braid_stream_core::capture_rule`), answered as
//!   `HalError::CaptureRefused`: for example a wait inside a capture on an eagerly recorded
//!   event (capture isolation). A graph launched on a capturing stream
//!   is spliced into that capture. Replayed nodes appear in the timeline under the stream they
//!   were captured on, with `from_graph` set.
//! - **Sanitizer.** An independent happens-before tracker ([`sanitizer`]) checks every
//!   access of every op, eager or replayed, against stream order, event record/wait and host
//!   synchronization, and reports races between streams, uses after free and accesses outside
//!   live allocations ([`RaceReport`]), per [`SanitizerMode`]. A sub-allocator can declare its
//!   blocks ([`SimDevice::sanitizer_note_alloc`]) so that reuse of a block is checked too.
//! - **Timeline.** [`SimDevice::timeline`] lists the executed ops of a device (each with its
//!   device ordinal), [`SimNode::timeline`] those of all devices;
//!   [`SimDevice::chrome_trace_json`] exports them with host calls, event flows and memory
//!   counters for Perfetto ([`trace`]), [`SimNode::chrome_trace_json`] with a process per
//!   device and the link tracks. Each kind of record is a ring of at most
//!   [`SimConfig::timeline_capacity`](SimConfig#structfield.timeline_capacity) records
//!   ([`DEFAULT_TIMELINE_CAPACITY`]): the oldest are dropped first and counted
//!   ([`SimDevice::timeline_dropped`], and `otherData` in the export), so host memory stays
//!   bounded however long the run.
//! - **Several devices.** A [`SimNode`] is several devices on one engine: one virtual time
//!   axis, data store and sanitizer; each device has its own host clock (as if driven by its
//!   own host thread or process), compute units, copy engines, communication engine, memory
//!   capacity and address range, so a pointer names its device and `is_live` on one device is
//!   false for another's memory. A stream may wait on an event recorded on another device of
//!   its node; a device synchronize waits only for that device's streams. A `memcpy_d2d`
//!   between two devices' memories is a peer copy: allowed once the stream's device has
//!   `enable_peer_access` to the other (devices of one server of the [`Topology`]), it takes a
//!   copy engine and the link between the devices for latency + bytes / bandwidth, and moves
//!   the bytes in data mode; without peer access it (and any op touching another device's
//!   memory) is refused, naming both devices. Links are contended: transfers on one link take
//!   turns. [`SimDevice::new`] is a node of one; objects of different nodes are refused.
//! - **Faults.** Any backend call can be made to fail on demand, by kind, at the `n`-th call
//!   or at a seeded rate, including kernels that fail after their launch and report it at a
//!   later synchronize ([`fault`]); the runtime's limits on live streams and events are
//!   enforced ([`limits`]).
//! - **Collectives.** The hal's collective extension
//!   (`braid_stream_core::hal::CollectiveBackend` for [`SimBackend`]): [`SimComm`]
//!   (HCCL-style communicators: `init_all` over devices of one [`SimNode`], or a root info
//!   joined by every rank) and `SimBackend::launch_collective`: each rank submits its part;
//!   parts are matched per call by stream-core's one call matcher (a mismatch is refused
//!   when it arrives, as `HalError::CollectiveMismatch`), a rank's stream holds back later work until every rank's part is in (a host
//!   synchronization that would wait on it waits for ranks driven by other threads, up to
//!   [`SimConfig::collective_timeout`](SimConfig#structfield.collective_timeout), then fails
//!   with `HalError::CollectiveIncomplete` naming the missing ranks instead of hanging; at
//!   once when only the waiting thread ever drove those ranks), and
//!   the collective then takes the alpha–beta time of the algorithm picked for the wiring
//!   ([`collective_bound`]), occupying each device's communication engine and the links it
//!   uses, overlapping compute. Captured collectives run again at every replay.
//! - **Not modelled yet.** Stream priorities are accepted and kept but do not affect
//!   scheduling; the engine keeps the state of dropped events and streams (their slots are
//!   small; only the live counts of [`limits`] go down); concurrent ops do not share memory
//!   bandwidth. In a node: a kernel touching a peer's memory (peer access enabled) runs at its
//!   usual cost, without link traffic; host copies keep the profile's PCIe figures, not a
//!   contended host link; the trace's `allocated` counter is the node's.
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | `device`, `stream`, `event`, `graph` | the hal types; [`SimDevice`] also has the observability API (timeline, statistics, sanitizer reports, fault counts) |
//! | `config`, [`profile`] | [`SimConfig`]; [`Profile`]: profile files (every figure with its unit, source and kind; the shipped ones in `profiles/`), read into a [`DeviceProfile`] and a [`NodeProfile`] |
//! | `engine` (and `engine::submit`, `engine::events`, `engine::observe`) | the discrete-event engine of a node: host clocks, streams, events, scheduling on resources and links, captures |
//! | `node`, `device_state` | [`SimNode`], [`NodeConfig`]; what the engine keeps per device |
//! | `topology`, `link` | [`Topology`], [`LinkSpec`] (figures with their sources); links as contended resources |
//! | `resource`, `op`, `compute`, `queue`, `job`, `buffers` | contended units; one piece of work; what an op reads and writes; data effects in virtual-time order; kernels computed outside the engine lock; output buffers kept from one kernel to the next |
//! | `custom` | user operators: [`host_op`] bodies |
//! | `gate`, `engine::gates` | [`HostGate`], [`GraphGate`]: a stream's later work held back until the host opens it, eagerly or at every launch of a graph (a blocking host callback) |
//! | `workspace` | [`WorkspaceSizes`]: the workspace built-in kernels ask for (none by default; a dry run sets another backend's), [`SimPrepared`] |
//! | `memory` (and `memory::vmm`, `memory::mappings`, `memory::view`), `host` | the address space of each device, data store, virtual memory, the node's data as one op sees it; pinned host memory |
//! | `capture` | recording work into graphs |
//! | [`sanitizer`] | the independent happens-before tracker and its [`RaceReport`]s |
//! | `timeline`, [`trace`] | executed ops and statistics; the Perfetto export |
//! | [`fault`], [`limits`] | fault injection; live stream and event limits |
//! | [`collective`] (`communicators`, `matching`, `placement`, [`cost`](collective::cost), `effect`, `backlog`, `remote`) | collectives, one room each: [`SimComm`] and communicators, matching the ranks' parts, placing a call on links and engines, the alpha–beta cost, the data effect, work held back behind a call, communicators spanning processes |
//!
//! ```
//! use braid_backend_sim::{SimConfig, SimDevice};
//! use braid_stream_core::hal::{Device as _, Stream as _};
//! use braid_stream_core::kernel::Kernel;
//! use braid_stream_core::types::DeviceSlice;
//!
//! let dev = SimDevice::new(SimConfig::new());
//! let s = dev.create_stream(0).unwrap();
//! let x = dev.alloc(16).unwrap();
//! s.launch(&Kernel::Fill { dst: DeviceSlice::new(x, 16), value: 2.0 }.into(), "init").unwrap();
//! let mut out = [0u8; 4];
//! unsafe { s.memcpy_d2h(out.as_mut_ptr(), x, 4).unwrap() };
//! s.synchronize().unwrap();
//! assert_eq!(f32::from_le_bytes(out), 2.0);
//! assert_eq!(dev.timeline().len(), 2);
//!
//! // 32 MiB of address space, then eight 2 MiB pages mapped in one call.
//! let base = dev.reserve_address(32 << 20).unwrap();
//! dev.map_physical_pages(base, 2 << 20, 8).unwrap();
//! // Each page is a mapping of its own: the one at 4 MiB goes alone, and a run over all
//! // eight, unmapped from the last page down, stops there after five pages.
//! let page_2 = braid_stream_core::types::DevicePtr(base.0 + (4 << 20));
//! unsafe { dev.unmap_physical(page_2, 2 << 20).unwrap() };
//! let err = unsafe { dev.unmap_physical_pages(base, 2 << 20, 8) }.unwrap_err();
//! assert_eq!(err.done, 5);
//! ```
#![warn(missing_docs)]

mod buffers;
mod capture;
pub mod collective;
mod compute;
mod config;
mod custom;
mod device;
mod device_state;
mod engine;
mod event;
pub mod fault;
mod gate;
mod graph;
mod host;
pub mod ipc;
mod job;
pub mod limits;
mod link;
mod memory;
mod node;
mod op;
pub mod profile;
mod queue;
mod resource;
pub mod sanitizer;
mod stream;
mod timeline;
mod topology;
pub mod trace;
mod workspace;

pub use collective::communicators::{SimComm, JOIN_TIMEOUT};
pub use collective::cost::{collective_bound, LinkParams, TwoLevel, Wiring};
pub use collective::remote::RemoteGroup;
pub use config::{
    SimConfig, SimMode, DEFAULT_COLLECTIVE_TIMEOUT, DEFAULT_IPC_TIMEOUT, DEFAULT_TIMELINE_CAPACITY,
    THREADS_ENV,
};
pub use custom::{host_op, HostOpFn};
pub use device::SimDevice;
pub use event::SimEvent;
pub use fault::{CallKind, FaultCounts, FaultPlan};
pub use gate::{GraphGate, HostGate};
pub use graph::SimGraph;
pub use memory::host_budget;
pub use node::{NodeConfig, SimNode};
pub use profile::{DeviceProfile, NodeProfile, Profile, ProfileError};
pub use sanitizer::report::{OpRef, RaceKind, RaceReport};
pub use sanitizer::SanitizerMode;
pub use stream::SimStream;
pub use timeline::{OpRecord, SimStats};
pub use topology::{CollectiveSpec, LinkSpec, Topology};
pub use workspace::{SimPrepared, WorkspaceSizes};

/// Re-exported so users of the timeline need not depend on `braid-stream-core` for it.
pub use braid_stream_core::kernel::ComputeUnit;

/// The simulated backend: ties [`SimDevice`], [`SimStream`], [`SimEvent`] and [`SimGraph`]
/// together.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SimBackend;

impl braid_stream_core::hal::Backend for SimBackend {
    type Device = SimDevice;
    type Stream = SimStream;
    type Event = SimEvent;
    type Graph = SimGraph;
    type Prepared = SimPrepared;
    type OpBody = HostOpFn;
    const NAME: &'static str = "sim";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        assert_send_sync::<SimDevice>();
        assert_send_sync::<SimStream>();
        assert_send_sync::<SimEvent>();
        assert_send_sync::<SimGraph>();
        assert_send_sync::<SimBackend>();
    }
}
