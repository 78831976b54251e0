//! PyTorch memory-snapshot traces for braid: read them, replay them through braid's caching
//! allocator, and write braid's own memory in the same format.
//!
//! | module | job |
//! |---|---|
//! | [`snapshot`] | serde types for `torch.cuda.memory._dump_snapshot` pickles; parsing |
//! | [`replay_plan`] | snapshot → prologue + window of alloc/free ops; PyTorch's reservation over the window |
//! | [`replay`](mod@replay) | runs a plan through [`braid_allocator::CachingAllocator`] on any backend |
//! | [`report`] | braid next to PyTorch, as a table or JSON |
//! | `sim` | (feature `sim`, on by default) replay on a fresh simulated device; `replay_file`: from a snapshot file to a report (`braid trace replay`) |
//! | [`export`] | memory state + history → a snapshot pickle pytorch.org/memory_viz opens ([`MemoryExport::from_allocator`] for braid's own allocator) |
//!
//! Only the `sim` feature (on by default) depends on a backend (`braid-backend-sim`); without
//! it the crate parses, plans, replays on a backend of the caller's choice and exports.
//!
//! ```no_run
//! # #[cfg(feature = "sim")] {
//! use braid_trace::{replay_file, ReplayOptions};
//! let report = replay_file("snapshot.pickle", &ReplayOptions::default())?;
//! println!("{}", report.table());
//! assert!(report.peak_reserved_bytes <= report.torch_peak_reserved_bytes);
//! # }
//! # Ok::<(), braid_trace::TraceError>(())
//! ```
//!
//! Known limitation: `serde_pickle` loses some strings that PyTorch's pickles share through
//! the memo inside shared frame lists, so stack frames read from PyTorch files may have empty
//! names or files (and the odd empty-string setting reads as `None`). Actions, addresses,
//! sizes, streams, segments and blocks are not affected (checked against Python's `pickle`
//! on every file in the repository's `traces/`).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod error;
pub mod export;
mod from_allocator;
mod lenient;
pub mod pyvalue;
pub mod replay;
pub mod replay_plan;
pub mod report;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
pub mod snapshot;

pub use braid_allocator::AllocatorConfig;
pub use error::{Result, TraceError};
pub use export::{ExportBlock, ExportEvent, ExportSegment, MemoryExport};
pub use pyvalue::PyValue;
pub use replay::{parse_conf, replay, ReplayStats};
pub use replay_plan::{Op, PlanSummary, ReplayPlan, TorchWindow};
pub use report::ReplayReport;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub use sim::{replay_file, replay_on_sim, replay_plan_on_sim, ReplayOptions, SimReplay};
pub use snapshot::{Action, Block, BlockState, Frame, Segment, Snapshot, TraceEvent};
