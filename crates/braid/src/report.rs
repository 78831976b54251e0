//! [`Report`]: the error a program's `main` returns, printed for a person to read.
//!
//! When `main` returns `Err(e)`, Rust prints `Error: ` and `e`'s `Debug` form. For braid's
//! errors (and most others) that form is the derived one: the enum's variant and every field,
//! escaped, on one line. A [`Report`] prints the error's message instead, then each error in
//! its [`source`](Error::source) chain on a line of its own:
//!
//! ```text
//! Error: the dry run's closure called Stream::launch on sim:0 ...
//!   caused by: ...
//! ```
//!
//! Any error that is `std::error::Error + Send + Sync + 'static` converts with `?`, so a
//! program mixing braid's errors (`StreamError`, `AllocError`, `GraphError`, ...) with its
//! own needs no conversion code; [`Report::msg`] makes one from a message.
//!
//! ```
//! fn main() -> Result<(), braid::Report> {
//!     let batch: u32 = std::env::var("MY_BATCH").unwrap_or_else(|_| "8".into()).parse()?;
//!     if batch == 0 {
//!         return Err(braid::Report::msg("MY_BATCH must be at least 1"));
//!     }
//!     let buffers = braid::StreamError::NotCapturing { stream: braid::StreamId(1) };
//!     let report = braid::Report::from(buffers);
//!     assert_eq!(format!("{report:?}"), "stream 1 is not capturing");
//!     Ok(())
//! }
//! ```

use std::error::Error;
use std::fmt;

/// An error for `main` to return (see the [module docs](self)): its `Debug` form, which Rust
/// prints when `main` fails, is the error's message followed by one `caused by:` line per
/// error of its source chain. A cause whose message the line before already ends with (an
/// error that prints its source in its own message) is not repeated.
///
/// It is deliberately not an [`Error`] itself, so that every error converts into it with `?`.
pub struct Report {
    error: Box<dyn Error + Send + Sync + 'static>,
}

impl Report {
    /// A report of `error`.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        Report {
            error: Box::new(error),
        }
    }

    /// A report of a plain message, for failures that are no error value (a check the
    /// program makes itself).
    pub fn msg(message: impl fmt::Display + Send + Sync + 'static) -> Self {
        Report::new(Message(message.to_string()))
    }

    /// The error reported.
    pub fn error(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The error reported, then each error of its source chain, in order.
    pub fn chain(&self) -> impl Iterator<Item = &(dyn Error + 'static)> {
        let first: &(dyn Error + 'static) = &*self.error;
        std::iter::successors(Some(first), |&e| e.source())
    }

    /// The lines the report prints: the error's message, then the messages of its causes
    /// that the line before does not already end with.
    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        for error in self.chain() {
            let message = error.to_string();
            if lines.last().is_some_and(|last| last.ends_with(&message)) {
                continue;
            }
            lines.push(message);
        }
        lines
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for Report {
    fn from(error: E) -> Self {
        Report::new(error)
    }
}

impl fmt::Display for Report {
    /// The error's own message (`{:#}`: with its causes, joined by `: `).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.write_str(&self.lines().join(": "))
        } else {
            write!(f, "{}", self.error)
        }
    }
}

impl fmt::Debug for Report {
    /// The error's message, then `\n  caused by: ` and each cause's: what `main` prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines = self.lines().into_iter();
        if let Some(first) = lines.next() {
            f.write_str(&first)?;
        }
        for cause in lines {
            write!(f, "\n  caused by: {cause}")?;
        }
        Ok(())
    }
}

/// The error [`Report::msg`] makes.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Message {}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with an optional source, printing its source in its message when `embeds`.
    #[derive(Debug)]
    struct Layer {
        message: &'static str,
        embeds: bool,
        source: Option<Box<Layer>>,
    }

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match (&self.source, self.embeds) {
                (Some(source), true) => write!(f, "{}: {source}", self.message),
                _ => f.write_str(self.message),
            }
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.source.as_deref().map(|s| s as &(dyn Error + 'static))
        }
    }

    fn layer(message: &'static str, embeds: bool, source: Option<Layer>) -> Layer {
        Layer {
            message,
            embeds,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn debug_is_the_message_then_one_line_per_cause() {
        let error = layer(
            "decode step 3 failed",
            false,
            Some(layer(
                "graph launch refused",
                false,
                Some(layer("pool 'kv' is asleep", false, None)),
            )),
        );
        let report = Report::from(error);
        assert_eq!(
            format!("{report:?}"),
            "decode step 3 failed\n  caused by: graph launch refused\n  caused by: pool 'kv' is asleep"
        );
        assert_eq!(report.to_string(), "decode step 3 failed");
        assert_eq!(
            format!("{report:#}"),
            "decode step 3 failed: graph launch refused: pool 'kv' is asleep"
        );
        assert_eq!(report.chain().count(), 3);
    }

    #[test]
    fn a_cause_the_line_before_already_shows_is_not_repeated() {
        let error = layer(
            "dry-run capture 0 failed",
            true,
            Some(layer(
                "model failed",
                true,
                Some(layer("no weights", false, None)),
            )),
        );
        assert_eq!(
            format!("{:?}", Report::from(error)),
            "dry-run capture 0 failed: model failed: no weights"
        );
        let error = layer(
            "step failed",
            false,
            Some(layer(
                "model failed",
                true,
                Some(layer("no weights", false, None)),
            )),
        );
        assert_eq!(
            format!("{:?}", Report::from(error)),
            "step failed\n  caused by: model failed: no weights"
        );
    }

    #[test]
    fn a_message_reports_itself_and_braid_errors_convert() {
        let report = Report::msg("a replay differed from the eager run");
        assert_eq!(
            format!("{report:?}"),
            "a replay differed from the eager run"
        );
        assert!(report.error().source().is_none());
        let stream = braid_stream_core::StreamError::NotCapturing {
            stream: braid_stream_core::StreamId(1),
        };
        let expected = stream.to_string();
        let report: Report = stream.into();
        assert_eq!(format!("{report:?}"), expected);
        assert!(!format!("{report:?}").contains("NotCapturing"));
    }
}
