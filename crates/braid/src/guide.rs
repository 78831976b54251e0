//! The user guide: the chapters of the repository's `docs/guide/`, one module each.
//!
//! Each chapter is the documentation of an empty module below, so that its Rust code blocks
//! compile and run as doctests of this crate (`cargo test -p braid --doc`, and so in
//! `cargo test --workspace`) and the API documentation shows the guide beside the API.
//! Links between chapters point to the Markdown files of the repository (`03-graphs.md`);
//! here, use the modules:
//!
//! 1. [`streams_and_events`]: devices, streams, events, and what braid orders;
//! 2. [`allocator`]: the stream-ordered caching allocator, its configuration, pools, sleep
//!    and wake;
//! 3. [`graphs`]: capture, replay, pools shared between graphs, `GraphRunner`, task update,
//!    graph memory known before capture;
//! 4. [`operators`]: your own operators, on the simulator and through aclnn;
//! 5. [`devices_and_collectives`]: several devices, HCCL's collectives, several processes;
//! 6. [`acl`]: the ACL backend, braid-acl-sim, and what to run on a real Atlas server;
//! 7. [`torch_npu`]: unmodified torch_npu on braid-acl-sim, with race reports and timelines;
//! 8. [`fault_injection`]: failing backend calls on demand;
//! 9. [`traces_and_timelines`]: the sanitizer, Perfetto timelines, PyTorch memory traces;
//! 10. [`reading_the_outputs`]: `braid demo`'s table, the examples' `RESULT` lines, logs;
//! 11. [`profiles`]: where the simulator's figures come from.
//!
//! How the guide's shell commands, Python programs and sample outputs are tested is in
//! `docs/guide/README.md`.

#[doc = include_str!("../../../docs/guide/01-streams-and-events.md")]
pub mod streams_and_events {}

#[doc = include_str!("../../../docs/guide/02-allocator.md")]
pub mod allocator {}

#[doc = include_str!("../../../docs/guide/03-graphs.md")]
pub mod graphs {}

#[doc = include_str!("../../../docs/guide/04-operators.md")]
pub mod operators {}

#[doc = include_str!("../../../docs/guide/05-devices-and-collectives.md")]
pub mod devices_and_collectives {}

#[doc = include_str!("../../../docs/guide/06-acl.md")]
pub mod acl {}

#[doc = include_str!("../../../docs/guide/07-torch-npu.md")]
pub mod torch_npu {}

#[doc = include_str!("../../../docs/guide/08-fault-injection.md")]
pub mod fault_injection {}

#[doc = include_str!("../../../docs/guide/09-traces-and-timelines.md")]
pub mod traces_and_timelines {}

#[doc = include_str!("../../../docs/guide/10-reading-the-outputs.md")]
pub mod reading_the_outputs {}

#[doc = include_str!("../../../docs/guide/11-profiles.md")]
pub mod profiles {}

#[doc = include_str!("../../../docs/guide/12-llama-decoder.md")]
pub mod llama_decoder {}
