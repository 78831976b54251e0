//! Grouped point-to-point calls: a batch of sends and receives to several peers issued as one
//! call ([`Communicator::batch_send_recv`], `HcclBatchSendRecv`), and groups of them spanning
//! streams ([`Communicator::group`], `HcclGroupStart` / `HcclGroupEnd`).
//!
//! Two ranks that each send to the other and then receive hang with plain sends and receives
//! (each waits for a receive the other has not reached). In a batch or a group they do not:
//! the calls are checked when they are added, held on the host, and enqueued together when
//! the batch is issued or the group ends, in one order every rank agrees on
//! ([`braid_stream_core::collective::batch_order`]); on HCCL inside one
//! `HcclBatchSendRecv` or between `HcclGroupStart` and `HcclGroupEnd`.
//!
//! Sends and receives pair per (sender, receiver) as everywhere else: the `k`-th send from
//! `a` to `b`, whether in a batch, a group or alone, with the `k`-th receive of `b` from `a`.
//! A batch whose part disagrees with its peer's (count or data type) is refused whole with
//! [`CollectiveError::PeerMismatch`] before anything is enqueued. A send whose receive never
//! comes is not a mismatch when it is issued (the receive may come later): on the simulator a
//! host wait on it fails with the missing rank named (`HalError::CollectiveIncomplete`).
//!
//! **Groups left open.** As in NCCL and HCCL, a group's calls are not enqueued before the
//! group ends, so a stream synchronize inside an open group does not wait for them. braid
//! keeps one group per rank and refuses what would silently go wrong:
//! - a collective issued directly on a rank whose group is open is
//!   [`CollectiveError::GroupOpen`] (add it to the group or end the group first);
//! - a second group on a rank whose group is open is [`CollectiveError::GroupAlreadyOpen`]
//!   (groups do not nest in braid; NCCL counts nesting depth, HCCL documents none);
//! - a [`Group`] dropped without [`Group::end`] enqueues nothing, and the rank's next call
//!   (a collective, a batch or a group) is refused once with [`CollectiveError::GroupDropped`],
//!   after which the rank works as before.
//!
//! Groups of other communicators, and of other ranks of the same communicator, are
//! independent: a group is per rank, not per thread as HCCL's (braid issues a group's calls
//! between `HcclGroupStart` and `HcclGroupEnd` only when it ends).

use crate::communicator::Communicator;
use crate::error::{CollectiveError, Result};
use crate::ops::elements;
use braid_stream_core::collective::{batch_order, CollectiveCall, CollectiveOp, Signature};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::types::DevicePtr;
use braid_stream_core::{
    CollectiveBuffer, DType, DeviceSlice, Stream, StreamPosition, WrongDevice,
};
use std::fmt;

/// One send or receive of a batch ([`Communicator::batch_send_recv`]): HCCL's
/// `HcclSendRecvItem`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SendRecv {
    /// Send to or receive from which rank.
    pub op: CollectiveOp,
    /// The buffer sent or received into.
    pub buffer: DeviceSlice,
    /// Its element type.
    pub dtype: DType,
}

impl SendRecv {
    /// Sends `buffer` (whole elements of `dtype`) to rank `peer`.
    pub fn send(buffer: impl CollectiveBuffer, dtype: DType, peer: u32) -> SendRecv {
        SendRecv {
            op: CollectiveOp::Send { peer },
            buffer: buffer.device_slice(),
            dtype,
        }
    }

    /// Receives into `buffer` (whole elements of `dtype`) what rank `peer` sends.
    pub fn recv(buffer: impl CollectiveBuffer, dtype: DType, peer: u32) -> SendRecv {
        SendRecv {
            op: CollectiveOp::Recv { peer },
            buffer: buffer.device_slice(),
            dtype,
        }
    }
}

/// A rank's group state: open, or dropped open and not reported yet.
#[derive(Debug, Default)]
pub(crate) struct GroupSlot {
    open: bool,
    /// Calls of a group dropped without `end`, reported by the rank's next call.
    dropped: Option<usize>,
}

/// An open group of one rank's sends and receives ([`Communicator::group`]): each call is
/// checked when added and held; [`Group::end`] enqueues them all. Dropping it without `end`
/// enqueues nothing (see the module docs).
#[must_use = "a group enqueues nothing until Group::end"]
pub struct Group<'c, B: CollectiveBackend> {
    comm: &'c Communicator<B>,
    calls: Vec<(Stream<B>, CollectiveCall)>,
    ended: bool,
}

impl<B: CollectiveBackend> fmt::Debug for Group<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Group(rank {} of {}, {} call(s))",
            self.comm.rank(),
            self.comm.ranks(),
            self.calls.len()
        )
    }
}

impl<B: CollectiveBackend> Communicator<B> {
    /// Opens a group on this rank (`HcclGroupStart`): add sends and receives with
    /// [`Group::send`] and [`Group::recv`] (on any streams of this rank's device) and enqueue
    /// them together with [`Group::end`] (`HcclGroupEnd`). A rank with a group open refuses
    /// direct collectives and a second group (see the module docs).
    pub fn group(&self) -> Result<Group<'_, B>> {
        let mut slot = self.inner.group.lock();
        self.take_dropped(&mut slot)?;
        if slot.open {
            return Err(CollectiveError::GroupAlreadyOpen { rank: self.rank() });
        }
        slot.open = true;
        tracing::debug!(rank = self.rank(), "group opened");
        Ok(Group {
            comm: self,
            calls: Vec::new(),
            ended: false,
        })
    }

    /// Runs `build` on a fresh group and ends it: the positions of its calls, in the order
    /// added. If `build` fails, nothing is enqueued and its error is returned (the rank is
    /// not left with a dropped group).
    pub fn grouped(
        &self,
        build: impl FnOnce(&mut Group<'_, B>) -> Result<()>,
    ) -> Result<Vec<StreamPosition>> {
        let mut group = self.group()?;
        match build(&mut group) {
            Ok(()) => group.end(),
            Err(e) => {
                group.discard();
                Err(e)
            }
        }
    }

    /// Enqueues this rank's sends and receives `items` on `stream` as one call
    /// (`HcclBatchSendRecv`): transfers to and from several peers that cannot deadlock
    /// whatever order each rank lists them in. Every item is checked (peer, whole elements,
    /// at least one element) and the batch is checked against the peers' calls before
    /// anything is enqueued; a refused batch enqueues nothing.
    pub fn batch_send_recv(
        &self,
        stream: &Stream<B>,
        items: &[SendRecv],
    ) -> Result<StreamPosition> {
        let Some(first) = items.first() else {
            return Err(CollectiveError::EmptyBatch {
                rank: self.rank(),
                what: "batch",
            });
        };
        self.check_no_group(first.op)?;
        let mut calls = items
            .iter()
            .map(|item| self.p2p_call(stream, item))
            .collect::<Result<Vec<_>>>()?;
        batch_order(self.rank(), &mut calls);
        let signatures: Vec<Signature> = calls.iter().map(CollectiveCall::signature).collect();
        let span = tracing::debug_span!("batch_send_recv", rank = self.rank(), items = calls.len());
        let _entered = span.enter();
        let comm = &self.inner.comm;
        let mut position = None;
        let mut launch = || -> Result<()> {
            position = Some(stream.launch_send_recv_batch(comm, &calls, "batch_send_recv")?);
            Ok(())
        };
        match &self.inner.check {
            Some(check) => check.admit_batch(self.rank(), &signatures, &mut launch)?,
            None => launch()?,
        }
        position.ok_or(CollectiveError::NotLaunched {
            op: calls[0].op,
            rank: self.rank(),
        })
    }

    /// Refuses a direct collective `op` while this rank has a group open, and reports a group
    /// dropped open.
    pub(crate) fn check_no_group(&self, op: CollectiveOp) -> Result<()> {
        let mut slot = self.inner.group.lock();
        self.take_dropped(&mut slot)?;
        if slot.open {
            return Err(CollectiveError::GroupOpen {
                op,
                rank: self.rank(),
            });
        }
        Ok(())
    }

    /// Reports, once, a group dropped without `end`.
    fn take_dropped(&self, slot: &mut GroupSlot) -> Result<()> {
        match slot.dropped.take() {
            Some(calls) => Err(CollectiveError::GroupDropped {
                rank: self.rank(),
                calls,
            }),
            None => Ok(()),
        }
    }

    /// Checks one send or receive of this rank on `stream` and makes its call.
    fn p2p_call(&self, stream: &Stream<B>, item: &SendRecv) -> Result<CollectiveCall> {
        let (peer, buffer) = match item.op {
            CollectiveOp::Send { peer } => (peer, "send"),
            CollectiveOp::Recv { peer } => (peer, "recv"),
            op => {
                return Err(CollectiveError::BadPeer {
                    op,
                    rank: self.rank(),
                    peer: self.rank(),
                    ranks: self.ranks(),
                })
            }
        };
        self.check_peer(item.op, peer)?;
        if !stream.device().same_as(self.device()) {
            return Err(CollectiveError::WrongDevice(Box::new(WrongDevice {
                call: format!("{} of rank {}", item.op, self.rank()).into(),
                what: "stream",
                expected: self.device().id(),
                found: stream.device().id(),
            })));
        }
        let count = elements(item.op, buffer, item.buffer, item.dtype)?;
        if count == 0 {
            return Err(CollectiveError::ZeroCount { op: item.op });
        }
        let (send, recv) = match item.op {
            CollectiveOp::Send { .. } => (item.buffer.ptr, DevicePtr(0)),
            _ => (DevicePtr(0), item.buffer.ptr),
        };
        Ok(CollectiveCall {
            op: item.op,
            send,
            recv,
            count,
            dtype: item.dtype,
            v: None,
        })
    }
}

impl<B: CollectiveBackend> Group<'_, B> {
    /// Adds a send of `buffer` (whole elements of `dtype`) to rank `peer` on `stream`,
    /// checked now, enqueued by [`Group::end`].
    pub fn send(
        &mut self,
        stream: &Stream<B>,
        buffer: impl CollectiveBuffer,
        dtype: DType,
        peer: u32,
    ) -> Result<()> {
        self.add(stream, SendRecv::send(buffer, dtype, peer))
    }

    /// Adds a receive into `buffer` (whole elements of `dtype`) from rank `peer` on `stream`,
    /// checked now, enqueued by [`Group::end`].
    pub fn recv(
        &mut self,
        stream: &Stream<B>,
        buffer: impl CollectiveBuffer,
        dtype: DType,
        peer: u32,
    ) -> Result<()> {
        self.add(stream, SendRecv::recv(buffer, dtype, peer))
    }

    /// Adds `item` on `stream`.
    pub fn add(&mut self, stream: &Stream<B>, item: SendRecv) -> Result<()> {
        let call = self.comm.p2p_call(stream, &item)?;
        self.calls.push((stream.clone(), call));
        Ok(())
    }

    /// The calls added so far.
    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Whether no call was added yet.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Closes the group and enqueues its calls (`HcclGroupEnd`), checked against the peers'
    /// calls first: the positions of the calls, in the order they were added. An empty group
    /// is [`CollectiveError::EmptyBatch`]; a refused group enqueues nothing. Either way the
    /// rank's group is closed.
    pub fn end(mut self) -> Result<Vec<StreamPosition>> {
        self.ended = true;
        self.close();
        let comm = self.comm;
        let rank = comm.rank();
        if self.calls.is_empty() {
            return Err(CollectiveError::EmptyBatch {
                rank,
                what: "group",
            });
        }
        // Issue in the order every rank agrees on, remembering where each call was added.
        let mut order: Vec<usize> = (0..self.calls.len()).collect();
        let mut sorted: Vec<CollectiveCall> = self.calls.iter().map(|(_, c)| c.clone()).collect();
        batch_order(rank, &mut sorted);
        order.sort_by_key(|&i| {
            // Stable: the position in `sorted` of the i-th added call.
            let key = &self.calls[i].1;
            (sorted.iter().position(|c| c == key), i)
        });
        let signatures: Vec<Signature> =
            order.iter().map(|&i| self.calls[i].1.signature()).collect();
        let span = tracing::debug_span!("group_end", rank, calls = order.len());
        let _entered = span.enter();
        let native = &comm.inner.comm;
        let mut positions = vec![None; self.calls.len()];
        let calls = &self.calls;
        let mut launch = || -> Result<()> {
            B::group_start(native).map_err(|source| CollectiveError::Backend {
                call: "group_start",
                source,
            })?;
            let mut issued = Ok(());
            for &i in &order {
                let (stream, call) = &calls[i];
                match stream.launch_collective(native, call, &call.op.to_string()) {
                    Ok(pos) => positions[i] = Some(pos),
                    Err(e) => {
                        issued = Err(e.into());
                        break;
                    }
                }
            }
            let ended = B::group_end(native).map_err(|source| CollectiveError::Backend {
                call: "group_end",
                source,
            });
            issued.and(ended)
        };
        match &comm.inner.check {
            Some(check) => check.admit_batch(rank, &signatures, &mut launch)?,
            None => launch()?,
        }
        positions
            .into_iter()
            .zip(calls)
            .map(|(p, (_, call))| p.ok_or(CollectiveError::NotLaunched { op: call.op, rank }))
            .collect()
    }

    /// Closes the group without enqueuing anything and without reporting it as dropped.
    fn discard(mut self) {
        self.ended = true;
        self.close();
    }

    /// Marks the rank's group closed.
    fn close(&self) {
        self.comm.inner.group.lock().open = false;
    }
}

impl<B: CollectiveBackend> Drop for Group<'_, B> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut slot = self.comm.inner.group.lock();
        slot.open = false;
        slot.dropped = Some(self.calls.len());
        tracing::warn!(
            rank = self.comm.rank(),
            calls = self.calls.len(),
            "group dropped without Group::end: nothing enqueued"
        );
    }
}
