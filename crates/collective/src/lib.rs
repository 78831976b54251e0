//! Collective communication over braid's backends.
#![warn(missing_docs)]

mod backend;
mod buffer;
mod communicator;
mod error;
mod ledger;
mod ops;

pub use backend::CollectiveBackend;
pub use braid_stream_core::collective::{
    CollectiveCall, CollectiveOp, ReduceOp, RootInfo, Signature, ROOT_INFO_BYTES,
};
pub use buffer::CollectiveBuffer;
pub use communicator::{CommOptions, Communicator};
pub use error::{CollectiveError, Result};
pub use ledger::MismatchCheck;

#[cfg(test)]
mod test_backend;
#[cfg(test)]
mod tests;
