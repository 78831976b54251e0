//! The commands' standard output, which notices when its reader has gone: `braid plan | head`
//! closes the pipe after ten lines, the next write fails with `EPIPE` (Rust ignores
//! `SIGPIPE`), and the command then ends quietly instead of reporting "Broken pipe".

use std::io::{self, Write};

/// Standard output that remembers a write refused because nobody reads the pipe any more.
pub struct Stdout {
    inner: io::Stdout,
    reader_gone: bool,
}

impl Stdout {
    /// The process's standard output.
    pub fn new() -> Self {
        Stdout {
            inner: io::stdout(),
            reader_gone: false,
        }
    }

    /// Whether a write or flush failed because the reading end of the pipe is closed.
    pub fn reader_gone(&self) -> bool {
        self.reader_gone
    }

    fn note<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        if let Err(err) = &result {
            if err.kind() == io::ErrorKind::BrokenPipe {
                self.reader_gone = true;
            }
        }
        result
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.inner.write(buf);
        self.note(result)
    }

    fn flush(&mut self) -> io::Result<()> {
        let result = self.inner.flush();
        self.note(result)
    }
}
