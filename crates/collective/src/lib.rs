//! Collective communication over braid's backends.
#![warn(missing_docs)]

mod backend;
mod transport;

pub use backend::CollectiveBackend;
pub use braid_stream_core::collective::{
    CollectiveCall, CollectiveOp, ReduceOp, RootInfo, Signature, ROOT_INFO_BYTES,
};
pub use transport::{RootInfoTransport, TcpRootInfoTransport, TransportError};
