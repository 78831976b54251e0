//! braid's `tracing` events on stderr, filtered by `RUST_LOG` (`target=level` directives
//! separated by commas, a bare level for every target: `RUST_LOG=debug`,
//! `RUST_LOG=braid_allocator=trace`). Unset or empty, nothing is shown; stdout keeps only the
//! command's output.
//!
//! The filter is `tracing-subscriber`'s `Targets`, not its regex-based `EnvFilter`: the
//! directives braid's users write need no regular expressions, and leaving them out keeps the
//! regex engine out of the CLI's build.

use tracing_subscriber::filter::{LevelFilter, ParseError, Targets};
use tracing_subscriber::prelude::*;

/// Name of the variable read.
const VARIABLE: &str = "RUST_LOG";

/// A `RUST_LOG` that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum LogFilterError {
    /// A directive that is not `target=level` or a level.
    #[error("{VARIABLE}: {0}")]
    Parse(#[from] ParseError),
    /// A value that is not unicode.
    #[error("{VARIABLE}: not valid unicode")]
    NotUnicode,
}

/// The filter `value` (the variable's value, `None` when unset) asks for.
fn filter(value: Option<&str>) -> Result<Targets, ParseError> {
    match value.map(str::trim) {
        None | Some("") => Ok(Targets::new().with_default(LevelFilter::OFF)),
        Some(directives) => directives.parse(),
    }
}

/// Installs the process's subscriber: events `RUST_LOG` enables, written to stderr.
pub fn install() -> Result<(), LogFilterError> {
    let value = match std::env::var(VARIABLE) {
        Ok(value) => Some(value),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => return Err(LogFilterError::NotUnicode),
    };
    let filter = filter(value.as_deref())?;
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn directives_select_targets_and_levels() {
        let all = filter(Some("debug")).unwrap();
        assert!(all.would_enable("braid_allocator::state", &Level::DEBUG));
        assert!(!all.would_enable("braid_allocator::state", &Level::TRACE));
        let one = filter(Some("braid_allocator=trace")).unwrap();
        assert!(one.would_enable("braid_allocator::state", &Level::TRACE));
        assert!(!one.would_enable("braid_backend_sim", &Level::ERROR));
        for off in [None, Some(""), Some("  ")] {
            assert!(!filter(off).unwrap().would_enable("braid", &Level::ERROR));
        }
        assert!(filter(Some("braid=[")).is_err());
    }
}
