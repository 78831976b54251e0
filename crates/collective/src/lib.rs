//! Collective communication over braid's backends: communicators over several devices and
//! HCCL's collectives as stream operators.
//!
//! A [`Communicator`] is one rank's handle: its device, its rank and the number of ranks.
//! Make every rank of a single-process communicator at once with [`Communicator::init_all`]
//! (`HcclCommInitAll`), or join a communicator whose ranks live in several processes or nodes
//! with [`Communicator::root_info`] on rank 0, the root info's bytes sent to every other rank
//! over your own transport, and [`Communicator::init_root_info`] on each rank
//! (`HcclGetRootInfo`, `HcclCommInitRootInfo`).
//!
//! Each collective ([`Communicator::all_reduce`], [`all_gather`](Communicator::all_gather),
//! [`reduce_scatter`](Communicator::reduce_scatter), [`broadcast`](Communicator::broadcast),
//! [`send`](Communicator::send), [`recv`](Communicator::recv),
//! [`all_to_all`](Communicator::all_to_all)) enqueues this rank's part on a stream of the rank's
//! device, as an operator that declares what it reads and writes: it is ordered by events and
//! stream waits like a kernel, the caching allocator's automatic mode keeps its buffers alive
//! until it is ordered, and it is captured into graphs and replayed. Buffers are anything that
//! is a [`CollectiveBuffer`] (device slices, device memory, allocator buffers); element counts
//! come from their lengths.
//!
//! Bad input is a [`CollectiveError`] that names what is wrong (a device given twice, a rank,
//! root or peer out of range, a stream of another device, a buffer of the wrong size, a root
//! info that is not one), checked before anything is enqueued; the communicator, its streams
//! and allocators stay usable after it. Ranks that would hang on hardware because they issue
//! collectives in a different order or with different operations, counts, types or roots get
//! [`CollectiveError::Mismatch`] instead, naming the rank, the call and the difference: for a
//! single-process communicator always on the simulator and an option on ACL
//! ([`CommOptions::check_mismatch`], on by default); for a root-info communicator through a
//! [`MismatchCheck`] that exchanges signatures between the processes ([`CommOptions::check`]).
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | `communicator` | [`Communicator`] and how it is made; [`CommOptions`] |
//! | `ops` | the collectives and their checks |
//! | `ledger` | mismatch detection: [`MismatchCheck`] and the single-process ledger |
//! | `buffer` | [`CollectiveBuffer`] |
//! | `backend` | [`CollectiveBackend`]: what a backend provides (HCCL's communicator calls) |
//! | `sim` | the simulator's implementation (feature `sim`, default) |
//! | `error` | [`CollectiveError`] |
#![warn(missing_docs)]

mod backend;
mod buffer;
mod communicator;
mod error;
mod ledger;
mod ops;
#[cfg(feature = "sim")]
mod sim;
mod transport;

pub use backend::CollectiveBackend;
pub use braid_stream_core::collective::{
    CollectiveCall, CollectiveOp, ReduceOp, RootInfo, Signature, ROOT_INFO_BYTES,
};
pub use buffer::CollectiveBuffer;
pub use communicator::{CommOptions, Communicator};
pub use error::{CollectiveError, Result};
pub use ledger::MismatchCheck;
pub use transport::{RootInfoTransport, TcpRootInfoTransport, TransportError};

#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod tests;
