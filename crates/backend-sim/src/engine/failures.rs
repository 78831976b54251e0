//! Operators that failed when they ran (a user operator's host body panicked, a kernel met
//! an index out of range): each is reported as the device
//! reports a kernel that failed after its launch (see [`crate::fault`]), and the sanitizer
//! marks what it should have written as unwritten.

use super::{Engine, EventRecord};
use crate::queue::FailedOp;

impl Engine {
    /// Reports the operators the data queue found failed: pending on the stream they were
    /// launched on (for a graph node, the graph's launching stream) and on the events recorded
    /// there after them, until a synchronize or query reports them.
    pub(super) fn report_failed_ops(&mut self) {
        for f in self.queue.take_failures() {
            let FailedOp {
                device,
                stream,
                seq,
                name,
                writes,
                start_ns,
                end_ns,
                message,
            } = f;
            let events: Vec<usize> = self
                .events
                .iter()
                .enumerate()
                .filter(|(_, ev)| {
                    matches!(ev.record, EventRecord::At(_))
                        && ev.recorded_on.is_some_and(|(s, _)| s == stream)
                        && ev.record_seq >= seq
                })
                .map(|(i, _)| i)
                .collect();
            let (ordinal, local) = self.locate(stream);
            tracing::error!(
                device = ordinal,
                stream = local,
                op = %name,
                %message,
                "an operator failed on the device; reported by the next synchronize or query"
            );
            let what = format!("{message}; the ranges it writes were not written");
            if let Some(dev) = self.devices.get_mut(device) {
                dev.faults.fail_op(stream, events, what);
            }
            self.sanitizer
                .op_failed(ordinal, &name, (start_ns, end_ns), &writes);
        }
    }
}
