//! Host gates: a stream's later work held back until the host opens the gate, as a stream
//! behind a blocking host callback waits for the host thread that runs it
//! (`aclrtLaunchCallback` with `ACL_CALLBACK_BLOCK` in `braid-acl-sim`).
//!
//! A gate is one more kind of held-back call of the collective backlog
//! (`collective::backlog`): from it on, the stream is deferred, so what is submitted to it
//! afterwards (work, event records and waits, graph launches, collective parts) is kept in
//! order and placed once the gate is opened, no earlier than the host time of the opening. A
//! host synchronization waiting on the stream waits for another thread to open it, up to the
//! node's collective timeout, then fails naming the gate. A gate cannot be captured.

use crate::collective::Held;
use crate::engine::Engine;
use braid_stream_core::hal::HalError;

impl Engine {
    /// Holds back the later work of stream `s` behind a new gate; its number.
    pub(crate) fn hold_gate(&mut self, s: u32) -> Result<u64, HalError> {
        self.host_call("hold_gate");
        if self.stream(s)?.capture.is_some() {
            return Err(HalError::InvalidArgument(
                "a host gate cannot be captured into a graph".to_string(),
            ));
        }
        self.coll.gates.0 += 1;
        let id = self.coll.gates.0;
        let host = self.dev().host_ns;
        self.coll.push_held(s, host, Held::Gate(id));
        Ok(id)
    }

    /// Opens gate `id`: its stream's held-back work is placed, from the current host time.
    pub(crate) fn open_gate(&mut self, id: u64) -> Result<(), HalError> {
        self.host_call("open_gate");
        if id == 0 || id > self.coll.gates.0 {
            return Err(HalError::InvalidArgument(format!(
                "host gate {id} was never made"
            )));
        }
        self.coll.gates.1.insert(id);
        self.pump()
    }

    /// Whether stream `s`, whose first held-back call is gate `id`, may pass it (it was
    /// opened): then the gate is removed and the stream's work resumes no earlier than the
    /// host time of its device now.
    pub(crate) fn pass_gate(&mut self, s: u32, id: u64) -> bool {
        if !self.coll.gates.1.remove(&id) {
            return false;
        }
        self.coll.backlog_pop(s);
        let device = self.streams.get(s as usize).map(|st| st.device as usize);
        if let Some(now) = device.and_then(|d| self.devices.get(d)).map(|d| d.host_ns) {
            if let Ok(st) = self.stream_mut(s) {
                st.tail = st.tail.max(now);
            }
        }
        true
    }
}
