//! PyTorch memory-snapshot traces for braid: read them, replay them through braid's caching
//! allocator, and write braid's own memory in the same format.
//!
//! | module | job |
//! |---|---|
//! | [`snapshot`] | serde types for `torch.cuda.memory._dump_snapshot` pickles; parsing |
//! | [`replay_plan`] | snapshot → prologue + window of alloc/free ops; PyTorch's reservation over the window |
//! | [`replay`](mod@replay) | runs a plan through [`braid_allocator::CachingAllocator`] (simulated device by default) |
//! | [`report`] | braid next to PyTorch, as a table or JSON (`braid trace replay`) |
//! | [`export`] | memory state + history → a snapshot pickle pytorch.org/memory_viz opens ([`MemoryExport::from_allocator`] for braid's own allocator) |
//!
//! ```no_run
//! use braid_trace::{replay_file, ReplayOptions};
//! let report = replay_file("snapshot.pickle", &ReplayOptions::default())?;
//! println!("{}", report.table());
//! assert!(report.peak_reserved_bytes <= report.torch_peak_reserved_bytes);
//! # Ok::<(), braid_trace::TraceError>(())
//! ```
//!
//! Known limitation: `serde_pickle` loses some strings that PyTorch's pickles share through
//! the memo inside shared frame lists, so stack frames read from PyTorch files may have empty
//! names or files (and the odd empty-string setting reads as `None`). Actions, addresses,
//! sizes, streams, segments and blocks are not affected (checked against Python's `pickle`
//! on every file in the repository's `traces/`).
#![warn(missing_docs)]

pub mod error;
pub mod export;
mod from_allocator;
mod lenient;
pub mod pyvalue;
pub mod replay;
pub mod replay_plan;
pub mod report;
pub mod snapshot;

pub use braid_allocator::AllocatorConfig;
pub use error::{Result, TraceError};
pub use export::{ExportBlock, ExportEvent, ExportSegment, MemoryExport};
pub use pyvalue::PyValue;
pub use replay::{parse_conf, replay, replay_on_sim, ReplayStats, SimReplay};
pub use replay_plan::{Op, PlanSummary, ReplayPlan, TorchWindow};
pub use report::{replay_file, replay_plan_on_sim, ReplayOptions, ReplayReport};
pub use snapshot::{Action, Block, BlockState, Frame, Segment, Snapshot, TraceEvent};
