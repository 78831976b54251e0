//! Collective communication over braid's backends: communicators over several devices and
//! HCCL's collectives as stream operators.
//!
//! This crate is a front layer over the hal's collective extension
//! ([`CollectiveBackend`], in `braid-stream-core`): each backend implements it in its own
//! crate (the simulator's node, HCCL in `braid-backend-acl`), and this crate depends on no
//! backend.
//!
//! A [`Communicator`] is one rank's handle: its device, its rank and the number of ranks.
//! Make every rank of a single-process communicator at once with [`Communicator::init_all`]
//! (`HcclCommInitAll`), or join a communicator whose ranks live in several processes or nodes
//! with [`Communicator::root_info`] on rank 0, the root info's bytes sent to every other rank
//! over a [`RootInfoTransport`] (your own, or `TcpRootInfoTransport` of the `tcp` feature), and
//! [`Communicator::init_root_info`] on each rank (`HcclGetRootInfo`, `HcclCommInitRootInfo`).
//! Some ranks of a communicator form a sub-communicator with [`Communicator::split`]
//! (`HcclCreateSubCommConfig`), whose collectives involve only them.
//!
//! Each collective ([`Communicator::all_reduce`], [`all_gather`](Communicator::all_gather),
//! [`reduce_scatter`](Communicator::reduce_scatter), [`broadcast`](Communicator::broadcast),
//! [`send`](Communicator::send), [`recv`](Communicator::recv),
//! [`all_to_all`](Communicator::all_to_all), [`barrier`](Communicator::barrier), and the
//! variable-count [`all_gather_v`](Communicator::all_gather_v),
//! [`reduce_scatter_v`](Communicator::reduce_scatter_v) and
//! [`all_to_all_v`](Communicator::all_to_all_v) with per-rank [`Blocks`]) enqueues this
//! rank's part on a stream of the rank's device, as an operator that declares what it reads and writes: it is ordered by events and
//! stream waits like a kernel, the caching allocator's automatic mode keeps its buffers alive
//! until it is ordered, and it is captured into graphs and replayed. Buffers are anything that
//! is a [`CollectiveBuffer`] (device slices, device memory, allocator buffers); element counts
//! come from their lengths. [`ReduceOp::Avg`] averages in one call; HCCL has none, so on ACL
//! it is HCCL's sum followed by a scale on the same stream.
//!
//! Bad input is a [`CollectiveError`] that names what is wrong (a device given twice, a rank,
//! root or peer out of range, a stream of another device, a buffer of the wrong size, a root
//! info that is not one), checked before anything is enqueued; the communicator, its streams
//! and allocators stay usable after it. Ranks that would hang on hardware because they issue
//! collectives in a different order or with different operations, counts, types or roots get
//! [`CollectiveError::Mismatch`] instead, naming the rank, the call and the difference: for a
//! single-process communicator always on the simulator and an option on ACL
//! ([`CommOptions::check_mismatch`], on by default); for a root-info communicator through a
//! check that exchanges every call's signature between the ranks through the communicator
//! itself ([`CommOptions::exchange_signatures`], on any backend; a debugging aid that costs a
//! small all-gather and a host wait per collective) or a [`MismatchCheck`] of your own
//! ([`CommOptions::check`]).
//!
//! # Example
//!
//! An all-reduce over the four devices of a simulated node:
//!
//! ```
//! use braid_backend_sim::{NodeConfig, SimBackend, SimConfig, SimNode, Topology};
//! use braid_collective::{CollectiveError, Communicator, ReduceOp};
//! use braid_stream_core::{DType, Device};
//!
//! let node = SimNode::new(NodeConfig {
//!     devices: 4,
//!     device: SimConfig::new(),
//!     topology: Topology::atlas_800_a2(4),
//! });
//! let devices: Vec<Device<SimBackend>> =
//!     node.devices().into_iter().map(|d| Device::new(d).unwrap()).collect();
//! let comms = Communicator::init_all(&devices).unwrap();
//! let mut buffers = Vec::new();
//! for comm in &comms {
//!     let device = comm.device();
//!     let stream = device.create_stream(0).unwrap();
//!     let buf = device.alloc(8).unwrap(); // 4 × f16
//!     let rank = comm.rank() as f32;
//!     stream.copy_h2d(buf.slice(), DType::F16.encode(&[rank; 4])).unwrap();
//!     comm.all_reduce(&stream, &buf, &buf, DType::F16, ReduceOp::Sum).unwrap();
//!     buffers.push((stream, buf));
//! }
//! for (stream, buf) in &buffers {
//!     let sum = stream.copy_d2h(buf.slice()).unwrap().wait_as(DType::F16).unwrap();
//!     assert_eq!(sum, [6.0; 4]); // 0 + 1 + 2 + 3
//! }
//! // A rank that issues another collective than the others is refused, naming the difference.
//! let (stream, buf) = &buffers[0];
//! comms[0].all_reduce(stream, buf, buf, DType::F16, ReduceOp::Max).unwrap();
//! let (stream, buf) = &buffers[1];
//! let err = comms[1].all_reduce(stream, buf, buf, DType::F16, ReduceOp::Min).unwrap_err();
//! assert!(matches!(err, CollectiveError::Mismatch { rank: 1, call: 1, .. }));
//! assert!(err.to_string().ends_with("operation allreduce(max) vs allreduce(min)"));
//! ```
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | `communicator` | [`Communicator`] and how it is made; [`CommOptions`] |
//! | `ops` | the collectives and their checks |
//! | `ops_v` | the variable-count collectives (all-gather-v, reduce-scatter-v, all-to-all-v) and their checks |
//! | `ledger` | mismatch detection: [`MismatchCheck`] and the single-process ledger |
//! | `async_error` | [`Communicator::async_error`]: failures reported after their call returned (`HcclGetCommAsyncError`) |
//! | `group` | grouped sends and receives: [`Communicator::batch_send_recv`], [`Communicator::group`] and [`Group`] |
//! | `exchange` | the signature exchange of root-info communicators ([`CommOptions::exchange_signatures`]) |
//! | `error` | [`CollectiveError`] |
//! | `transport` | [`RootInfoTransport`], `TcpRootInfoTransport` (`transport/tcp.rs`): the root info between processes |
//!
//! # Features
//!
//! - `tcp` (default): `TcpRootInfoTransport`, over tokio's sockets. Without it the crate
//!   compiles neither tokio nor async-trait (the `braid` facade forwards it; the `braid`
//!   binary leaves it off).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod async_error;
mod communicator;
mod error;
mod exchange;
mod group;
mod ledger;
mod ops;
mod ops_v;
mod split;
mod transport;

pub use braid_stream_core::collective::{
    Blocks, BlocksError, CollectiveCall, CollectiveOp, ReduceOp, RootInfo, Signature, VCounts,
    ROOT_INFO_BYTES,
};
pub use braid_stream_core::hal::CollectiveBackend;
pub use braid_stream_core::CollectiveBuffer;
pub use communicator::{CommOptions, Communicator};
pub use error::{CollectiveError, Result};
pub use group::{Group, SendRecv};
pub use ledger::MismatchCheck;
#[cfg(feature = "tcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "tcp")))]
pub use transport::TcpRootInfoTransport;
pub use transport::{RootInfoTransport, TransportError};

#[cfg(test)]
mod tests;
