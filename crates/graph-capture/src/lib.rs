//! braid's graph capture: capture sessions, shared graph pools and `GraphRunner`.
//!
//! **Status: not implemented yet.** Capture itself already works at the stream level
//! ([`braid_stream_core::Stream::begin_capture`], [`braid_stream_core::Stream::end_capture`],
//! [`braid_stream_core::Graph::launch`], with the capture rules enforced); this crate will add
//! sessions with private memory pools and the shape-keyed runner of DESIGN.md §5.
