//! Collectives on a simulated node: their alpha–beta cost ([`cost`]), what they do to the
//! numbers (`data`, `exchange`), how the ranks' parts of a call are matched (`group`), the
//! communicators (`communicator`), and the work held back behind a collective not yet run
//! (`backlog`). The engine's side is `engine::collectives`; the handle is [`crate::SimComm`].

pub(crate) mod backlog;
pub(crate) mod communicator;
pub mod cost;
pub(crate) mod data;
pub(crate) mod exchange;
pub(crate) mod remote;
