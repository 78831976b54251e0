//! The caching allocator ([`braid_allocator`]) on every backend: cross-stream lifetime (A1,
//! A3, A5, A8, A11, MindSpore's automatic mode and return flow), core accounting (C23–C27,
//! C30), private pools (E50, E54, E55, PyTorch's `use_on_oom` lending), a block shared with
//! other processes and shared again, and every typed error
//! followed by proof that the allocator and its device stay usable.
//!
//! One module per topic; every case is re-exported here, so a case is named
//! `allocator::CASE` wherever the suite lists it.

mod blocks;
mod capture_reuse;
mod cross_stream;
mod errors;
mod expandable;
mod ipc;
mod oom;
mod pools;
mod stats;

pub use blocks::*;
pub use capture_reuse::*;
pub use cross_stream::*;
pub use errors::*;
pub use expandable::*;
pub use ipc::*;
pub use oom::*;
pub use pools::*;
pub use stats::*;

/// Floats in the buffers of the cross-stream and capture cases.
const N: u64 = 1024;
