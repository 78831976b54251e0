//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong reading, planning, replaying or exporting a trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a pickle of a PyTorch memory snapshot.
    #[error("{origin}: not a PyTorch memory snapshot pickle: {source}")]
    Parse {
        /// Where the bytes came from (a path, or `"<reader>"`).
        origin: String,
        /// What the pickle decoder said.
        #[source]
        source: serde_pickle::Error,
    },
    /// The pickle decoded but is not a memory snapshot: it has none of the keys
    /// `torch.cuda.memory._dump_snapshot` writes (`segments`, `device_traces`).
    #[error(
        "{origin}: a pickle, but not a PyTorch memory snapshot: it has neither `segments` nor \
         `device_traces` (write one with torch.cuda.memory._dump_snapshot)"
    )]
    NotASnapshot {
        /// Where the bytes came from (a path, or `"<reader>"`).
        origin: String,
    },
    /// The pickle decoded but its content is not usable (for example a device index that
    /// has no trace).
    #[error("malformed snapshot: {0}")]
    Format(String),
    /// Writing the pickle failed.
    #[error("cannot write the snapshot pickle: {0}")]
    Export(#[source] serde_pickle::Error),
    /// The allocator configuration string is not valid.
    #[error("bad allocator configuration: {0}")]
    Config(String),
    /// Replaying a trace through the allocator failed.
    #[error("replay failed at event {event}: {message}")]
    Replay {
        /// Index of the failing operation in the replay plan.
        event: usize,
        /// What failed.
        message: String,
    },
}

/// `Result` with [`TraceError`].
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
