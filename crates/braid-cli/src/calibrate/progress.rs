//! What `braid calibrate` is measuring, on stderr while it runs (minutes on a server): a
//! progress bar where stderr is a terminal, one line per measurement where it is not (a log
//! file, CI). stdout keeps the results only.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};

/// Where progress goes.
enum Sink {
    /// A bar on the terminal.
    Bar(ProgressBar),
    /// A line per measurement.
    Lines(Box<dyn Write>),
}

/// Counts measurements as they start and shows them.
pub struct Progress {
    sink: Sink,
    total: u64,
    started: u64,
}

impl Progress {
    /// Progress of `total` measurements on stderr: a bar on a terminal, lines otherwise.
    pub fn stderr(total: u64) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "calibrate {bar:30} {pos}/{len} measurements, {elapsed}: {msg}",
            )
            .expect("a valid template");
            bar.set_style(style);
            Progress {
                sink: Sink::Bar(bar),
                total,
                started: 0,
            }
        } else {
            Progress::lines(total, Box::new(std::io::stderr()))
        }
    }

    /// Progress of `total` measurements as one line each on `out`.
    pub fn lines(total: u64, out: Box<dyn Write>) -> Progress {
        Progress {
            sink: Sink::Lines(out),
            total,
            started: 0,
        }
    }

    /// Progress nobody sees (the simulator's predictions run the same benchmarks).
    pub fn silent() -> Progress {
        Progress::lines(0, Box::new(std::io::sink()))
    }

    /// A measurement starts: `what` it measures.
    pub fn start(&mut self, what: &str) {
        self.started += 1;
        match &mut self.sink {
            Sink::Bar(bar) => {
                bar.set_position(self.started - 1);
                bar.set_message(what.to_string());
            }
            // Progress is a courtesy: a closed stderr must not stop the measurements.
            Sink::Lines(out) => {
                let _ = writeln!(out, "calibrate [{}/{}] {what}", self.started, self.total);
            }
        }
    }

    /// Every measurement is done.
    pub fn finish(&mut self) {
        if let Sink::Bar(bar) = &self.sink {
            bar.finish_and_clear();
        }
    }
}

/// `bytes` as a short size for progress messages (`64 KiB`, `256 MiB`).
pub fn size(bytes: u64) -> String {
    braid::allocator::format_size(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A `Write` whose bytes the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn each_measurement_is_a_numbered_line_where_there_is_no_terminal() {
        let out = Shared::default();
        let mut progress = Progress::lines(2, Box::new(out.clone()));
        progress.start("kernel launch");
        progress.start("matmul float16, 1024^3");
        progress.finish();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "calibrate [1/2] kernel launch\ncalibrate [2/2] matmul float16, 1024^3\n"
        );
    }
}
