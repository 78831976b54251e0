//! The side-by-side report of a replay: braid's allocator against PyTorch's own reservation
//! over the same window.

use crate::replay::ReplayStats;
use crate::replay_plan::ReplayPlan;
use braid_allocator::format_size;
use serde::Serialize;
use std::fmt::Write as _;

/// One replay, braid next to PyTorch. Byte counts are bytes; ratios are fractions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The trace file.
    pub file: String,
    /// The allocator configuration used (empty for the defaults).
    pub conf: String,
    /// Whether the snapshot has no history (the replay is its final state only).
    pub state_only: bool,
    /// `alloc` events in the window.
    pub alloc_events: u64,
    /// Frees in the window.
    pub free_events: u64,
    /// Ops replayed: prologue allocs plus window allocs and frees.
    pub events: u64,
    /// Blocks live before the window, allocated by the prologue.
    pub prologue_blocks: u64,
    /// Requested bytes of the prologue.
    pub prologue_bytes: u64,
    /// Peak live bytes, sizes rounded to 512 (what PyTorch counts as allocated).
    pub peak_live_bytes: u64,
    /// Peak live requested bytes (the lower bound for any allocator that does not move
    /// memory).
    pub peak_requested_bytes: u64,
    /// braid: peak allocated bytes.
    pub peak_allocated_bytes: u64,
    /// braid: peak reserved bytes.
    pub peak_reserved_bytes: u64,
    /// braid: peak active bytes.
    pub peak_active_bytes: u64,
    /// braid: `1 − peak active / peak reserved`.
    pub fragmentation: f64,
    /// braid: `1 − peak live / peak reserved`.
    pub waste: f64,
    /// braid: device mallocs (segments allocated), prologue included.
    pub device_mallocs: u64,
    /// braid: device mallocs during the window (after the prologue), comparable with
    /// `torch_device_mallocs`.
    pub window_device_mallocs: u64,
    /// braid: reserved bytes once the prologue ran, comparable with
    /// `torch_reserved_at_start_bytes`.
    pub reserved_at_start_bytes: u64,
    /// braid: wall time per replayed op, nanoseconds (fastest run).
    pub replay_ns_per_event: f64,
    /// braid: replayed ops per second (fastest run).
    pub events_per_second: f64,
    /// PyTorch: reserved bytes when recording started.
    pub torch_reserved_at_start_bytes: u64,
    /// PyTorch: peak reserved bytes over the window.
    pub torch_peak_reserved_bytes: u64,
    /// PyTorch: device mallocs in the window.
    pub torch_device_mallocs: u64,
    /// PyTorch: `1 − peak live / peak reserved`.
    pub torch_waste: f64,
}

fn ratio_left(used: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        1.0 - used as f64 / total as f64
    }
}

impl ReplayReport {
    /// Puts a plan and a replay's statistics side by side.
    pub fn new(
        file: &str,
        conf: &str,
        snapshot_state_only: bool,
        plan: &ReplayPlan,
        stats: &ReplayStats,
    ) -> Self {
        let s = &plan.summary;
        ReplayReport {
            file: file.to_owned(),
            conf: conf.to_owned(),
            state_only: snapshot_state_only,
            alloc_events: s.alloc_events,
            free_events: s.free_events,
            events: stats.events,
            prologue_blocks: s.prologue_blocks,
            prologue_bytes: s.prologue_bytes,
            peak_live_bytes: s.peak_live_bytes,
            peak_requested_bytes: s.peak_requested_bytes,
            peak_allocated_bytes: stats.peak_allocated_bytes,
            peak_reserved_bytes: stats.peak_reserved_bytes,
            peak_active_bytes: stats.peak_active_bytes,
            fragmentation: stats.fragmentation(),
            waste: ratio_left(s.peak_live_bytes, stats.peak_reserved_bytes),
            device_mallocs: stats.device_mallocs,
            window_device_mallocs: stats.window_device_mallocs,
            reserved_at_start_bytes: stats.reserved_after_prologue_bytes,
            replay_ns_per_event: stats.ns_per_event(),
            events_per_second: stats.events_per_second(),
            torch_reserved_at_start_bytes: s.torch.reserved_at_start,
            torch_peak_reserved_bytes: s.torch.peak_reserved_bytes,
            torch_device_mallocs: s.torch.device_mallocs,
            torch_waste: ratio_left(s.peak_live_bytes, s.torch.peak_reserved_bytes),
        }
    }

    /// The report as a human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let size = |b: u64| format!("{} ({b} B)", format_size(b));
        let pct = |f: f64| format!("{:.2}%", f * 100.0);
        let _ = writeln!(out, "trace   {}", self.file);
        if !self.conf.is_empty() {
            let _ = writeln!(out, "conf    {}", self.conf);
        }
        let _ = writeln!(
            out,
            "events  {} replayed: {} prologue allocs ({}), {} allocs, {} frees{}",
            self.events,
            self.prologue_blocks,
            format_size(self.prologue_bytes),
            self.alloc_events,
            self.free_events,
            if self.state_only {
                " (state-only snapshot)"
            } else {
                ""
            }
        );
        let _ = writeln!(out, "peak live  {}", size(self.peak_live_bytes));
        let _ = writeln!(out, "peak requested  {}", size(self.peak_requested_bytes));
        let _ = writeln!(out);
        let rows = [
            ("", "braid".to_owned(), "pytorch".to_owned()),
            (
                "peak reserved",
                size(self.peak_reserved_bytes),
                size(self.torch_peak_reserved_bytes),
            ),
            (
                "reserved at window start",
                size(self.reserved_at_start_bytes),
                size(self.torch_reserved_at_start_bytes),
            ),
            (
                "waste (1 - live/reserved)",
                pct(self.waste),
                pct(self.torch_waste),
            ),
            (
                "device mallocs in the window",
                self.window_device_mallocs.to_string(),
                self.torch_device_mallocs.to_string(),
            ),
            (
                "device mallocs with the prologue",
                self.device_mallocs.to_string(),
                "-".to_owned(),
            ),
            (
                "peak allocated",
                size(self.peak_allocated_bytes),
                "-".to_owned(),
            ),
            ("peak active", size(self.peak_active_bytes), "-".to_owned()),
            (
                "fragmentation (1 - active/reserved)",
                pct(self.fragmentation),
                "-".to_owned(),
            ),
            (
                "replay time per event",
                format!(
                    "{:.1} ns ({:.2} M events/s)",
                    self.replay_ns_per_event,
                    self.events_per_second / 1e6
                ),
                "-".to_owned(),
            ),
        ];
        let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        // The replay's figures size the columns, not its wall-clock time (the last row): the
        // table of a trace reads the same from run to run.
        let (figures, _) = rows.split_at(rows.len() - 1);
        let w1 = figures.iter().map(|r| r.1.len()).max().unwrap_or(0);
        for (name, braid, torch) in rows {
            let _ = writeln!(out, "{name:<w0$}  {braid:<w1$}  {torch}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ns_per_event: f64) -> ReplayReport {
        ReplayReport {
            file: "t.pickle".into(),
            conf: String::new(),
            state_only: false,
            alloc_events: 2,
            free_events: 1,
            events: 3,
            prologue_blocks: 0,
            prologue_bytes: 0,
            peak_live_bytes: 1 << 20,
            peak_requested_bytes: 1 << 20,
            peak_allocated_bytes: 1 << 20,
            peak_reserved_bytes: 2 << 20,
            peak_active_bytes: 1 << 20,
            fragmentation: 0.5,
            waste: 0.5,
            device_mallocs: 1,
            window_device_mallocs: 1,
            reserved_at_start_bytes: 0,
            replay_ns_per_event: ns_per_event,
            events_per_second: 1e9 / ns_per_event,
            torch_reserved_at_start_bytes: 0,
            torch_peak_reserved_bytes: 2 << 20,
            torch_device_mallocs: 1,
            torch_waste: 0.5,
        }
    }

    #[test]
    fn only_the_timing_row_changes_with_the_host_s_speed() {
        let (fast, slow) = (report(1.0).table(), report(123_456.7).table());
        let (fast, slow): (Vec<&str>, Vec<&str>) = (fast.lines().collect(), slow.lines().collect());
        assert_eq!(fast.len(), slow.len());
        let last = fast.len() - 1;
        assert_eq!(fast[..last], slow[..last], "{fast:#?}\n{slow:#?}");
        assert!(
            slow[last].starts_with("replay time per event") && slow[last].contains("123456.7 ns")
        );
    }
}
