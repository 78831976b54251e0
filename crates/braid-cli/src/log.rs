//! braid's `tracing` events on stderr, filtered by `RUST_LOG` (`tracing-subscriber`'s
//! `EnvFilter` syntax: `RUST_LOG=debug`, `RUST_LOG=braid_allocator=trace`). Unset or empty,
//! nothing is shown; stdout keeps only the command's output.

use tracing_subscriber::filter::{EnvFilter, FromEnvError, LevelFilter};

/// A `RUST_LOG` that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("RUST_LOG: {0}")]
pub struct LogFilterError(#[from] FromEnvError);

/// Installs the process's subscriber: events `RUST_LOG` enables, written to stderr.
pub fn install() -> Result<(), LogFilterError> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::OFF.into())
        .from_env()?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}
