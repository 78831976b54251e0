//! Submission: checks, peer access, placing ops on resources and links.

use super::*;

impl Engine {
    // ----- submission -----

    /// Checks what the engine needs to stay panic-free and memory safe.
    pub(super) fn check(op: &OpKind) -> Result<(), HalError> {
        let range = |what: &str, s: &DeviceSlice| {
            if s.ptr.0.checked_add(s.len).is_none() {
                Err(invalid(format!(
                    "{what} range at {} of {} bytes overflows the address space",
                    s.ptr, s.len
                )))
            } else {
                Ok(())
            }
        };
        let host = |what: &str, addr: usize, len: u64| {
            if len > 0 && addr == 0 {
                Err(invalid(format!("{what} host pointer is null")))
            } else if len > isize::MAX as u64 {
                Err(invalid(format!(
                    "copy of {len} bytes exceeds host address space"
                )))
            } else {
                Ok(())
            }
        };
        match op {
            OpKind::Custom(c) => {
                for r in c.0.reads.iter().chain(&c.0.writes) {
                    range("operator range", r)?;
                }
                Ok(())
            }
            OpKind::Kernel(k) => {
                if let Kernel::Matmul { m, k: kk, n, .. } = k.kernel {
                    let (m, kk, n) = (m as u128, kk as u128, n as u128);
                    let max = u64::MAX as u128;
                    if 2 * m * kk * n > max
                        || 4 * m * kk > max
                        || 4 * kk * n > max
                        || 4 * m * n > max
                    {
                        return Err(invalid(format!("matmul shape {m}x{kk}x{n} is too large")));
                    }
                }
                let total: u128 = k.reads().chain(k.writes()).map(|s| s.len as u128).sum();
                if total > u64::MAX as u128 {
                    return Err(invalid(format!("{} ranges are too large", k.name())));
                }
                k.validate().map_err(|e| invalid(e.to_string()))
            }
            OpKind::H2d { dst, src } => {
                range("memcpy_h2d destination", dst)?;
                host("memcpy_h2d source", *src, dst.len)
            }
            OpKind::D2h { dst, src } => {
                range("memcpy_d2h source", src)?;
                host("memcpy_d2h destination", *dst, src.len)
            }
            OpKind::D2d { dst, src } => {
                range("memcpy_d2d destination", dst)?;
                range("memcpy_d2d source", src)
            }
            OpKind::Memset { dst, .. } => range("memset destination", dst),
            // Collectives come through `Engine::collective`, which checks their ranges.
            OpKind::Collective(_) | OpKind::CollectiveEffect(_) => Ok(()),
            // Captured through `Engine::capture_gate`.
            OpKind::Gate(_) => Ok(()),
        }
    }

    /// Enqueues (or captures) `kind` on stream `s`.
    pub fn submit(&mut self, s: u32, kind: OpKind, label: &str) -> Result<(), HalError> {
        self.tick(self.dev().config.profile.eager_launch_ns, "launch");
        Self::check(&kind)?;
        if let (SimMode::Data, OpKind::Kernel(k)) = (self.mode, &kind) {
            if let Err(why) = &self.compute_threads {
                return Err(invalid(format!("{}: {why}", k.name())));
            }
            crate::compute::check_host_memory(k)?;
        }
        if self.devices.len() > 1 {
            self.check_peers(s, &kind, label)?;
        }
        let capturing = self.stream(s)?.capture.is_some();
        let op = Op {
            kind,
            label: self.shared_label(label),
            stream: s,
        };
        if capturing {
            return self.with_frontier(s, |cap, frontier| cap.add(op, frontier));
        }
        if self.is_updating(s) {
            return self.reissue(s, op);
        }
        let host = self.dev().host_ns;
        if self.coll.is_deferred(s) {
            self.coll.hold(s, host, Work::Op(op));
            return Ok(());
        }
        self.place_at(op, host)
    }

    /// `label` as a shared string: the last op's, when it is the same.
    fn shared_label(&mut self, label: &str) -> Arc<str> {
        if *self.last_label != *label {
            self.last_label = Arc::from(label);
        }
        self.last_label.clone()
    }

    /// Places `op` eagerly on its stream as if submitted at host time `host`.
    pub(crate) fn place_at(&mut self, op: Op, host: u64) -> Result<(), HalError> {
        let s = op.stream;
        let ready = host.max(self.stream(s)?.tail);
        let slot = self.slot(&op, ready);
        let acc = op.kind.accesses();
        let at = self.locate(s);
        self.sanitizer
            .eager_op(s, &acc, || op_info(&op, &slot, at, false))
            .map_err(|r| sanitizer_error(&r))?;
        let end = self.place(op, slot, None);
        let st = self.stream_mut(s)?;
        st.tail = st.tail.max(end);
        Ok(())
    }

    /// Index of the device whose address space holds `addr`, if any.
    pub(super) fn owner_of(&self, addr: u64) -> Option<u32> {
        self.memories
            .iter()
            .position(|m| m.owns(addr))
            .map(|i| i as u32)
    }

    /// Checks that every range of `kind`, submitted on stream `s`, is memory of `s`'s device
    /// or of a device `s`'s device has enabled peer access to.
    pub(super) fn check_peers(&self, s: u32, kind: &OpKind, label: &str) -> Result<(), HalError> {
        let own = self.stream(s)?.device;
        let acc = kind.accesses();
        for range in acc.reads().chain(acc.writes()) {
            let Some(other) = self.owner_of(range.ptr.0) else {
                continue;
            };
            if other != own && !self.peers.contains(&(own, other)) {
                return Err(invalid(format!(
                    "`{label}` ({}) on a stream of device {} uses memory of device {} at {}, \
                     and peer access from device {} to device {} is not enabled \
                     (enable_peer_access)",
                    kind.name(),
                    self.ordinal_of(own),
                    self.ordinal_of(other),
                    range.ptr,
                    self.ordinal_of(own),
                    self.ordinal_of(other),
                )));
            }
        }
        Ok(())
    }

    /// The route of `op` when it is a copy between the memories of two devices (a peer copy).
    pub(super) fn peer_route(&self, op: &OpKind) -> Option<Route> {
        if self.devices.len() < 2 {
            return None;
        }
        let OpKind::D2d { dst, src } = op else {
            return None;
        };
        let from = self.owner_of(src.ptr.0)?;
        let to = self.owner_of(dst.ptr.0)?;
        (from != to).then(|| self.links.route(from, to))
    }

    /// Lets device `from`'s streams access device `to`'s memory. Errors: the same device,
    /// or devices in different servers of the topology (their traffic goes over the network,
    /// through collectives).
    pub fn enable_peer(&mut self, from: u32, to: u32) -> Result<(), HalError> {
        self.host_call("enable_peer_access");
        let (a, b) = (self.ordinal_of(from), self.ordinal_of(to));
        if from == to {
            return Err(invalid(format!(
                "peer access from device {a} to itself: a device always accesses its own memory"
            )));
        }
        if !self.can_access_peer(from, to) {
            return Err(invalid(format!(
                "device {a} cannot access device {b}'s memory: they are in different servers of the node's topology"
            )));
        }
        self.peers.insert((from, to));
        Ok(())
    }

    /// Whether device `from` can be given access to device `to`'s memory (two devices of
    /// one server).
    pub fn can_access_peer(&self, from: u32, to: u32) -> bool {
        from != to
            && (to as usize) < self.devices.len()
            && self.links.topology().same_server(from, to)
    }

    /// Runs `f` on the capture stream `s` records into and on its frontier.
    pub(crate) fn with_frontier<T>(
        &mut self,
        s: u32,
        f: impl FnOnce(&mut Capture, &mut Vec<usize>) -> T,
    ) -> Result<T, HalError> {
        let Some(sc) = self
            .streams
            .get_mut(s as usize)
            .and_then(|st| st.capture.as_mut())
        else {
            return Err(invalid(format!("stream {s} is not capturing")));
        };
        let cap = self
            .captures
            .get_mut(&sc.id)
            .ok_or_else(|| invalid("stream is in a capture that no longer exists"))?;
        Ok(f(cap, &mut sc.frontier))
    }

    /// Where `op`, ready at `ready`, would run: the earliest time at or after `ready` at which
    /// its resource (of the device of its stream) has the units it demands free for its
    /// duration; for a peer copy, at which a copy engine and every link of its route are
    /// free for the transfer.
    pub(super) fn slot(&self, op: &Op, ready: u64) -> Slot {
        let dev = &self.devices[self.device_of_stream(op.stream)];
        let p = &dev.config.profile;
        let unit = op.kind.unit();
        let demand = op.kind.demand(p);
        let route = self.peer_route(&op.kind);
        let (start, duration) = match (&route, dev.unit_pool(unit)) {
            (Some(route), Some(pool)) => {
                let bytes = op.kind.writes().iter().map(|w| w.len).sum();
                let duration = route.duration_ns(bytes);
                let start = self
                    .links
                    .earliest_along(route, vec![(pool, demand)], ready, duration);
                (start, duration)
            }
            (None, Some(pool)) => {
                let duration = op.kind.duration_ns(p);
                (pool.earliest(ready, duration, demand), duration)
            }
            (_, None) => (ready, op.kind.duration_ns(p)),
        };
        Slot {
            start,
            end: start.saturating_add(duration),
            demand,
            route,
        }
    }

    /// Index of the device of stream `s` (node-wide index; the current device for an unknown
    /// one).
    pub(super) fn device_of_stream(&self, s: u32) -> usize {
        self.streams
            .get(s as usize)
            .map_or(self.cur, |st| st.device as usize)
    }

    /// Places `op` in `slot` (from [`Engine::slot`], with nothing placed in between); returns
    /// its end time. `launch`: the stream that launched the graph `op` is a node of (`None`
    /// for eager work); a failure of the op is reported there.
    pub(super) fn place(&mut self, op: Op, slot: Slot, launch: Option<u32>) -> u64 {
        let from_graph = launch.is_some();
        let unit = op.kind.unit();
        let (start, end) = (slot.start, slot.end);
        let d = self.device_of_stream(op.stream);
        let (device, local) = self.locate(op.stream);
        let dev = &mut self.devices[d];
        if let Some(pool) = dev.unit_pool_mut(unit) {
            pool.reserve(start, end - start, slot.demand);
        }
        dev.makespan = dev.makespan.max(end);
        dev.ops_executed += 1;
        if let Some(route) = &slot.route {
            self.links.reserve(route, start, end);
            if self.record_timeline {
                for hop in &route.hops {
                    let track = hop.name(|i| self.ordinal_of(i));
                    self.trace.links.push(LinkSlice {
                        device,
                        track,
                        label: op.label.to_string(),
                        start_ns: start,
                        end_ns: end,
                    });
                }
            }
        }
        if self.record_timeline {
            self.timeline.push(OpRecord {
                device,
                stream: local,
                label: op.label.to_string(),
                kind: op.kind.name(),
                start_ns: start,
                end_ns: end,
                unit,
                reads: op.kind.reads(),
                writes: op.kind.writes(),
                from_graph,
            });
        }
        if self.mode == SimMode::Data {
            let report = launch.unwrap_or(op.stream);
            self.queue.push_on(start, end, op.kind, d, report);
        }
        end
    }
}

/// Where an op runs: start, end and units demanded, and for a peer copy its route.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    start: u64,
    end: u64,
    demand: u32,
    route: Option<Route>,
}

/// What the sanitizer keeps about `op` placed in `slot`, made by stream `local` of the
/// device of ordinal `device`.
pub(super) fn op_info(op: &Op, slot: &Slot, at: (u32, u32), from_graph: bool) -> OpInfo {
    op_info_at(op, at, slot.start, slot.end, from_graph)
}

/// What the sanitizer keeps about `op` running from `start` to `end` on stream `local` of
/// the device of ordinal `device` (a rank's part of a collective has no [`Slot`]).
pub(crate) fn op_info_at(
    op: &Op,
    (device, local): (u32, u32),
    start: u64,
    end: u64,
    from_graph: bool,
) -> OpInfo {
    OpInfo {
        device,
        stream: Some(local),
        label: op.label.clone(),
        kind: op.kind.name(),
        start_ns: start,
        end_ns: end,
        from_graph,
        rank: match &op.kind {
            OpKind::Collective(part) => Some(part.rank),
            _ => None,
        },
    }
}
