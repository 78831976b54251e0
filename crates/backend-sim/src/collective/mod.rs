//! Collectives on a simulated node: their alpha–beta cost ([`cost`]), what they do to the
//! numbers (`data`), how the ranks' parts of a call are matched (`group`), and the work held back
//! behind a collective not yet run (`backlog`).

#[allow(dead_code)]
pub(crate) mod backlog;
#[allow(dead_code)]
pub(crate) mod communicator;
pub mod cost;
// Used by the engine integration of communicators (next step); tested on their own now.
#[allow(dead_code)]
pub(crate) mod data;
#[allow(dead_code)]
pub(crate) mod group;
