//! braid's stream-ordered caching allocator.
//!
//! **Status: not implemented yet.** This crate reserves its place in the workspace and its
//! dependency on `braid-stream-core`; it exports nothing until the allocator issue lands
//! (DESIGN.md §4: RAII device buffers, small/large pools, cross-stream frees driven by the
//! happens-before model of [`braid_stream_core::ordering`], OOM ladder, private pools, stats
//! and snapshots). Until then use [`braid_stream_core::Device::alloc`] for raw segments.
