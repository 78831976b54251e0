//! Events, host synchronization, captures and graph launches.

use super::submit::op_info;
use super::*;

impl Engine {
    // ----- events -----

    /// Records event `e` at stream `s`'s current position.
    pub fn record(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "record");
        let (external, owner) = {
            let ev = self.event(e)?;
            (ev.external, ev.device)
        };
        let st = self.stream(s)?;
        if owner != st.device {
            // As CUDA and ACL: an event is recorded on streams of its own device (streams of
            // other devices of the node may wait on it).
            return Err(invalid(format!(
                "event of device {} recorded on a stream of device {}: record it on a stream of its own device",
                self.ordinal_of(owner),
                self.ordinal_of(st.device)
            )));
        }
        let capture = st.capture.as_ref().map(|sc| (sc.id, sc.frontier.clone()));
        self.ipc_check_use(e, true, capture.is_some())?;
        match (capture_record(capture.is_some(), external), capture) {
            (RecordOutcome::RecordNode, _) => {
                self.with_frontier(s, |cap, _| cap.external.records.push(e))
            }
            (RecordOutcome::Recorded, Some((capture, frontier))) => {
                self.sanitizer.record_captured(e);
                self.events[e].recorded_on = None;
                self.events[e].record = EventRecord::Captured { capture, frontier };
                Ok(())
            }
            (RecordOutcome::Recorded, None) => {
                let host = self.devices[self.cur].host_ns;
                if self.coll.is_deferred(s) {
                    self.coll.hold_record(s, host, e);
                    return Ok(());
                }
                let t = st.tail.max(host);
                let was_pending = self.coll.supersede_record(e);
                self.record_at(s, e, t);
                self.ipc_recorded(e, t);
                if was_pending {
                    // Waits held back on the superseded record may go on.
                    return self.pump();
                }
                Ok(())
            }
        }
    }

    /// Records event `e` eagerly on stream `s`, completing at `t`.
    pub(crate) fn record_at(&mut self, s: u32, e: usize, t: u64) {
        self.sanitizer.record(s, e);
        self.events[e].recorded_on = Some((s, t));
        self.events[e].record_seq = self.queue.seq();
        if self.record_timeline {
            self.trace.markers.push(Marker {
                stream: s,
                name: format!("record e{e}"),
                start_ns: t,
                end_ns: t,
            });
        }
        self.events[e].record = EventRecord::At(t);
    }

    /// Makes later work on stream `s` wait for event `e`'s last record.
    pub fn wait(&mut self, s: u32, e: usize) -> Result<(), HalError> {
        self.tick(
            self.devices[self.cur].config.profile.eager_launch_ns,
            "wait",
        );
        let record = self.event(e)?.record.clone();
        let host = self.devices[self.cur].host_ns;
        self.ipc_check_use(e, false, self.stream(s)?.capture.is_some())?;
        if self.stream(s)?.capture.is_none() {
            if self.coll.is_deferred(s) || self.coll.is_pending(e) {
                // Behind a collective not yet run, or on a record held back behind one.
                self.coll.hold(s, host, Work::Wait(e));
                return Ok(());
            }
            if let EventRecord::At(_) = record {
                return self.wait_at(s, e, host);
            }
        }
        let captures = &self.captures;
        let st = self
            .streams
            .get_mut(s as usize)
            .ok_or_else(|| invalid(format!("unknown stream index {s}")))?;
        // The one capture rule decides what the wait may do (see
        // `braid_stream_core::capture_rule`); a refusal is typed for acl-sim to translate.
        let site = match &record {
            EventRecord::Never => RecordSite::Never,
            EventRecord::At(_) => RecordSite::Eager,
            EventRecord::Captured { capture, .. } => RecordSite::Capture {
                id: *capture,
                live: captures.contains_key(capture),
            },
        };
        let external = self.events[e].external;
        let outcome = capture_wait(st.capture.as_ref().map(|c| c.id), site, external)
            .map_err(HalError::CaptureRefused)?;
        if outcome == WaitOutcome::WaitNode {
            return self.with_frontier(s, |cap, _| cap.external.waits.push(e));
        }
        match (&mut st.capture, record) {
            (_, EventRecord::Never) => {}
            (None, EventRecord::Captured { capture, frontier }) => {
                st.capture = Some(StreamCapture {
                    id: capture,
                    frontier,
                });
                if let Some(cap) = self.captures.get_mut(&capture) {
                    cap.members.insert(s);
                }
            }
            (Some(sc), EventRecord::Captured { frontier, .. }) => {
                capture::union(&mut sc.frontier, &frontier);
            }
            // An eager stream's wait on an eager record was placed above (`wait_at`); the
            // rule refused one inside a capture.
            (_, EventRecord::At(_)) => {}
        }
        Ok(())
    }

    /// Makes later work on the eager stream `s` wait for event `e`'s last record, as if the
    /// wait was issued at host time `host`.
    pub(crate) fn wait_at(&mut self, s: u32, e: usize, host: u64) -> Result<(), HalError> {
        let EventRecord::At(t) = self.event(e)?.record else {
            return Ok(());
        };
        let recorded_on = self.event(e)?.recorded_on;
        let st = self.stream_mut(s)?;
        let from = st.tail.max(host);
        st.tail = st.tail.max(t);
        let to = st.tail.max(from);
        self.sanitizer.wait(s, e);
        if let (true, Some((rs, rt))) = (self.record_timeline, recorded_on) {
            self.trace.markers.push(Marker {
                stream: s,
                name: format!("wait e{e}"),
                start_ns: from,
                end_ns: to,
            });
            self.trace.flows.push(Flow {
                event: e,
                from_stream: rs,
                from_ns: rt,
                to_stream: s,
                to_ns: to,
            });
        }
        Ok(())
    }

    /// The completion time of event `e`: `None` if never recorded or recorded in a capture.
    pub(super) fn event_time(&self, e: usize) -> Result<Option<u64>, HalError> {
        Ok(match self.event(e)?.record {
            EventRecord::At(t) => Some(t),
            _ => None,
        })
    }

    /// Whether event `e` is complete.
    pub fn query_event(&mut self, e: usize) -> Result<bool, HalError> {
        self.host_call("query_event");
        if self.coll.is_pending(e) {
            return Ok(false);
        }
        let done = self
            .event_time(e)?
            .is_none_or(|t| t <= self.devices[self.cur].host_ns);
        if done {
            self.sanitizer.host_observed_event(e);
        }
        Ok(done)
    }

    /// Blocks the host until event `e` is complete.
    pub fn sync_event(&mut self, e: usize) -> Result<(), HalError> {
        if self.coll.is_pending(e) {
            self.host_call("synchronize_event");
            return Err(self.blocked_event(e));
        }
        let t = self.event_time(e)?.unwrap_or(0);
        self.block_until(t, "synchronize_event");
        self.sanitizer.host_observed_event(e);
        Ok(())
    }

    /// Milliseconds from event `a` to event `b`.
    pub fn elapsed_ms(&mut self, a: usize, b: usize) -> Result<f32, HalError> {
        self.host_call("elapsed_time");
        let host = self.devices[self.cur].host_ns;
        let time = |name: &str, e: usize| -> Result<u64, HalError> {
            if self.coll.is_pending(e) {
                return Err(invalid(format!(
                    "the {name} event's record is held back behind a collective not yet run"
                )));
            }
            let ev = self.event(e)?;
            if !ev.timing {
                return Err(invalid(format!(
                    "elapsed time needs timing events; the {name} event was created without \
                     timing (create it with EventFlags::TIMING)"
                )));
            }
            match ev.record {
                EventRecord::At(t) if t <= host => Ok(t),
                EventRecord::At(_) => {
                    Err(invalid(format!("the {name} event has not completed yet")))
                }
                EventRecord::Never => Err(invalid(format!("the {name} event was never recorded"))),
                EventRecord::Captured { .. } => Err(invalid(format!(
                    "the {name} event was last recorded in a graph capture and has no time"
                ))),
            }
        };
        let (ta, tb) = (time("start", a)?, time("end", b)?);
        Ok(((tb as f64 - ta as f64) / 1e6) as f32)
    }

    // ----- synchronization -----

    /// Whether all work on stream `s` is complete.
    pub fn query_stream(&mut self, s: u32) -> Result<bool, HalError> {
        self.host_call("query_stream");
        let done =
            !self.coll.is_deferred(s) && self.stream(s)?.tail <= self.devices[self.cur].host_ns;
        if done {
            self.sanitizer.host_observed_stream(s);
        }
        Ok(done)
    }

    /// Blocks the host until stream `s` is idle.
    pub fn sync_stream(&mut self, s: u32) -> Result<(), HalError> {
        if self.coll.is_deferred(s) {
            self.host_call("synchronize_stream");
            return Err(self.blocked_stream(s));
        }
        let t = self.stream(s)?.tail;
        self.block_until(t, "synchronize_stream");
        self.sanitizer.host_observed_stream(s);
        Ok(())
    }

    /// Blocks the current device's host until all work of the device is done (its streams;
    /// other devices' work is not waited for). Refused, naming what it waits for, when a
    /// stream of the device holds back work behind a collective not yet run.
    pub fn sync_device(&mut self) -> Result<(), HalError> {
        let held = self.devices[self.cur]
            .streams
            .iter()
            .copied()
            .find(|&s| self.coll.is_deferred(s));
        if let Some(s) = held {
            self.host_call("synchronize_device");
            return Err(self.blocked_stream(s));
        }
        let dev = self.dev();
        let t = dev
            .streams
            .iter()
            .filter_map(|&s| self.streams.get(s as usize))
            .map(|s| s.tail)
            .fold(dev.makespan, u64::max);
        self.block_until(t, "synchronize_device");
        let streams = &self.devices[self.cur].streams;
        self.sanitizer.host_observed_streams(streams);
        Ok(())
    }

    // ----- capture -----

    /// Starts a capture with stream `s` as origin.
    pub fn begin_capture(&mut self, s: u32, mode: CaptureMode) -> Result<(), HalError> {
        self.host_call("begin_capture");
        let id = self.next_capture;
        let st = self.stream_mut(s)?;
        if st.capture.is_some() {
            return Err(invalid(format!("stream {s} is already capturing")));
        }
        st.capture = Some(StreamCapture {
            id,
            frontier: Vec::new(),
        });
        self.next_capture += 1;
        self.captures.insert(
            id,
            Capture {
                origin: s,
                mode,
                members: BTreeSet::from([s]),
                nodes: Vec::new(),
                external: ExternalEvents::default(),
                open_groups: BTreeMap::new(),
                groups: Vec::new(),
            },
        );
        tracing::debug!(stream = s, capture = id, ?mode, "sim capture begin");
        Ok(())
    }

    /// Ends the capture begun on stream `s`: its nodes, external events, number of member
    /// streams (the origin included) and the handles of its task groups (to bind to the
    /// graph, [`Engine::bind_task_groups`]).
    #[allow(clippy::type_complexity)]
    pub fn end_capture(
        &mut self,
        s: u32,
    ) -> Result<(Vec<Node>, ExternalEvents, usize, Vec<u64>), HalError> {
        self.host_call("end_capture");
        let Some(sc) = &self.stream(s)?.capture else {
            return Err(invalid(format!("stream {s} is not capturing")));
        };
        let id = sc.id;
        let origin = self.captures.get(&id).map(|c| c.origin);
        if origin != Some(s) {
            return Err(invalid(format!(
                "stream {s} joined a capture begun on stream {}; end it there",
                origin.map_or_else(|| "?".to_string(), |o| o.to_string())
            )));
        }
        let cap = self
            .captures
            .remove(&id)
            .ok_or_else(|| invalid("capture vanished"))?;
        for m in &cap.members {
            if let Some(st) = self.streams.get_mut(*m as usize) {
                st.capture = None;
            }
        }
        tracing::debug!(
            stream = s,
            capture = id,
            nodes = cap.nodes.len(),
            members = cap.members.len(),
            "sim capture end"
        );
        let members = cap.members.len();
        Ok((cap.nodes, cap.external, members, cap.groups))
    }

    /// Capture status of stream `s`.
    pub fn capture_status(&mut self, s: u32) -> Result<CaptureStatus, HalError> {
        self.host_call("capture_status");
        Ok(if self.stream(s)?.capture.is_some() {
            CaptureStatus::Active
        } else {
            CaptureStatus::None
        })
    }

    /// Replays `nodes` on stream `s` (or records them into `s`'s capture), after the last
    /// record of each of `external`'s waited events; records its recorded events at the end.
    pub fn launch_graph(
        &mut self,
        s: u32,
        nodes: &[Node],
        external: &ExternalEvents,
    ) -> Result<(), HalError> {
        let p = &self.devices[self.cur].config.profile;
        let cost = p
            .graph_launch_ns
            .saturating_add((nodes.len() as u64).saturating_mul(p.graph_node_ns));
        self.tick(cost, "graph_launch");
        if self.stream(s)?.capture.is_some() {
            return self.with_frontier(s, |cap, frontier| {
                cap.add_graph(nodes, frontier);
                cap.external.extend(external);
            });
        }
        let held = self.coll.is_deferred(s)
            || nodes.iter().any(crate::collective::needs_run)
            || external.waits.iter().any(|&e| self.coll.is_pending(e));
        if held {
            return self.hold_graph(s, nodes, external);
        }
        for &e in &external.waits {
            // Recorded eagerly or by a launch, never in a capture: the rule lets an eager
            // stream wait on it.
            self.wait(s, e)?;
        }
        self.devices[self.cur].graph_launches += 1;
        let host = self.devices[self.cur].host_ns;
        self.replay_at(s, nodes, external, host)
    }

    /// Replays `nodes` on the eager stream `s` as if launched at host time `host`, then
    /// records `external`'s recorded events at its end.
    pub(crate) fn replay_at(
        &mut self,
        s: u32,
        nodes: &[Node],
        external: &ExternalEvents,
        host: u64,
    ) -> Result<(), HalError> {
        let base = host.max(self.stream(s)?.tail);
        let mut replay = self.sanitizer.begin_replay(s);
        let mut first_report: Option<RaceReport> = None;
        let mut ends: Vec<u64> = Vec::with_capacity(nodes.len());
        for node in nodes {
            let ready = node
                .deps
                .iter()
                .filter_map(|&d| ends.get(d))
                .fold(base, |a, &b| a.max(b));
            let slot = self.slot(&node.op, ready);
            if let Some(r) = replay.as_mut() {
                let acc: Accesses = node.op.kind.accesses();
                let info = op_info(&node.op, &slot, self.locate(node.op.stream), true);
                let reports = self.sanitizer.replay_node(r, &node.deps, &acc, info);
                if first_report.is_none() {
                    first_report = reports.into_iter().next();
                }
            }
            let end = self.place(node.op.clone(), slot, Some(s));
            ends.push(end);
        }
        if let Some(r) = replay {
            self.sanitizer.end_replay(r);
        }
        let end = ends.iter().fold(base, |a, &b| a.max(b));
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        let tail = st.tail;
        for &e in &external.records {
            let was_pending = self.coll.supersede_record(e);
            self.record_at(s, e, tail);
            if was_pending {
                self.pump()?;
            }
        }
        match first_report {
            Some(r) if self.sanitizer.mode() == SanitizerMode::Abort => Err(sanitizer_error(&r)),
            _ => Ok(()),
        }
    }
}
