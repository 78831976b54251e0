//! Observability: timeline, statistics, sanitizer reports, trace export.

use super::*;

impl Engine {
    // ----- observability -----

    /// Current host time of the current device.
    pub fn host_ns(&self) -> u64 {
        self.dev().host_ns
    }

    /// Executed ops of all devices in submission order (the newest, up to the timeline's
    /// capacity).
    pub fn timeline(&self) -> &Ring<OpRecord> {
        &self.timeline
    }

    /// Latest end of any op of the current device.
    pub fn makespan(&self) -> u64 {
        self.dev().makespan
    }

    /// The node's topology.
    pub fn topology(&self) -> &Topology {
        self.links.topology()
    }

    /// Latest end of any op of any device.
    pub fn node_makespan(&self) -> u64 {
        self.devices.iter().map(|d| d.makespan).max().unwrap_or(0)
    }

    /// The configuration of the current device.
    pub fn config(&self) -> &SimConfig {
        &self.dev().config
    }

    /// Names stream `s` as the tagged stream `tag` in reports.
    pub fn set_stream_tag(&mut self, s: u32, tag: &str) {
        let at = self.locate(s);
        self.stream_tags.insert(at, tag.to_string());
    }

    /// The sanitizer's stored reports, with tagged streams named and a hint where a tagged
    /// stream is involved.
    pub fn sanitizer_reports(&self) -> Vec<RaceReport> {
        self.sanitizer
            .reports()
            .iter()
            .map(|r| self.annotate(r.clone()))
            .collect()
    }

    /// Names the tagged streams of `r` and says how to order a tagged stream.
    pub(super) fn annotate(&self, mut r: RaceReport) -> RaceReport {
        let tag_of = |op: &OpRef| {
            op.stream
                .and_then(|s| self.stream_tags.get(&(op.device, s)))
                .cloned()
        };
        if let Some(first) = r.first.as_mut() {
            first.stream_tag = tag_of(first);
        }
        r.second.stream_tag = tag_of(&r.second);
        let tagged = r
            .first
            .iter()
            .chain([&r.second])
            .find_map(|op| op.stream_tag.clone().map(|t| (t, op.from_graph)));
        r.hint = tagged.map(|(tag, in_graph)| {
            if in_graph {
                format!(
                    "inside a capture the tagged stream {tag:?} starts from the beginning of the capture, not from where stream_switch was called: record a tagged event after the work it needs and wait on it in the tagged stream (create_tagged_event, record_on_current_stream, wait_on_current_stream)"
                )
            } else {
                format!(
                    "order the tagged stream {tag:?} with the other stream: a tagged event recorded after the work it needs and waited on in the tagged stream, or wait_stream"
                )
            }
        });
        r
    }

    /// Number of sanitizer reports found, stored or not.
    pub fn sanitizer_report_count(&self) -> u64 {
        self.sanitizer.total_reports()
    }

    /// Forgets the sanitizer's reports.
    pub fn clear_sanitizer_reports(&mut self) {
        self.sanitizer.clear_reports();
    }

    /// The timeline as Chrome Trace Event JSON: of the device of ordinal `only`, or of every
    /// device (a process each).
    pub fn chrome_trace_json(&self, only: Option<u32>) -> String {
        let devices: Vec<trace::DeviceTracks> = self
            .devices
            .iter()
            .map(|d| trace::DeviceTracks {
                ordinal: d.config.ordinal,
                name: d.config.profile.name.clone(),
                streams: d.streams.len() as u32,
            })
            .filter(|d| only.is_none_or(|o| o == d.ordinal))
            .collect();
        let streams: Vec<(u32, u32)> = (0..self.streams.len() as u32)
            .map(|s| self.locate(s))
            .collect();
        trace::chrome_trace(
            &devices,
            &streams,
            &self.timeline,
            &self.trace,
            self.timeline_capacity,
        )
    }

    /// Whether `range` lies in live memory (a segment, or consecutive mappings).
    pub fn is_live(&self, range: DeviceSlice) -> bool {
        self.memories[self.cur].is_valid(range)
    }

    /// Counters of the current device.
    pub fn stats(&self) -> SimStats {
        let (dev, mem) = (self.dev(), &self.memories[self.cur]);
        SimStats {
            ops_executed: dev.ops_executed,
            graph_launches: dev.graph_launches,
            allocations: mem.allocations(),
            frees: mem.frees(),
            bytes_allocated: mem.used(),
            peak_bytes_allocated: mem.peak(),
            resident_data_bytes: mem.resident_data_bytes(),
            invalid_accesses: mem.invalid_accesses(),
            failed_ops: mem.failed_ops(),
            host_allocations: dev.host.allocations(),
            host_frees: dev.host.frees(),
            host_bytes_allocated: dev.host.used(),
            peak_host_bytes_allocated: dev.host.peak(),
        }
    }
}
