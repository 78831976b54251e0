//! Collective calls as values: what one rank asks of a communicator (HCCL's and NCCL's
//! operations), shared by the backends that run them and the `braid-collective` front layer.
//!
//! A [`CollectiveCall`] names the operation, the buffers of *this* rank and the element count
//! with HCCL's meaning for each operation (see [`CollectiveCall::send_len`] and
//! [`CollectiveCall::recv_len`]). Its [`Signature`] is what every rank of a communicator must
//! agree on for the call to match: the front layer compares signatures to refuse mismatched
//! calls with a typed error instead of hanging.
//!
//! Which parts of the ranks belong to one call, and whether they agree, is the one
//! [`Matcher`], used by `braid-collective`'s ledger and by the simulator.
//!
//! Backends that run collectives implement the hal's collective extension
//! ([`crate::hal::CollectiveBackend`]); the front layer enqueues a rank's part with
//! [`crate::Stream::launch_collective`]. These are plain values: this module depends on no
//! other part of the crate but the data types.

mod batch;
mod blocks;
mod incomplete;
mod matcher;
mod overlap;

pub use batch::batch_order;
pub use blocks::{Blocks, BlocksError, VCounts};
pub use incomplete::Incomplete;
pub use matcher::{Arrival, CallKey, MatchError, Matcher, Mismatch, Part, Peers};
pub use overlap::{InPlace, Overlap};

use crate::dtype::DType;
use crate::types::{DevicePtr, DeviceSlice};
use std::fmt;
use std::sync::Arc;

/// Bytes of a root info (HCCL's `HCCL_ROOT_INFO_BYTES`).
pub const ROOT_INFO_BYTES: usize = 4108;

/// The opaque bytes rank 0 creates (`HcclGetRootInfo`) and every other rank of a
/// multi-process communicator receives over the user's transport before joining
/// (`HcclCommInitRootInfo`). What they hold is the backend's business.
#[derive(Clone, PartialEq, Eq)]
pub struct RootInfo(pub Box<[u8; ROOT_INFO_BYTES]>);

impl RootInfo {
    /// Root info from bytes received over a transport; `None` unless exactly
    /// [`ROOT_INFO_BYTES`] long (whether the content is valid is for the backend to say).
    pub fn from_bytes(bytes: &[u8]) -> Option<RootInfo> {
        let array: [u8; ROOT_INFO_BYTES] = bytes.try_into().ok()?;
        Some(RootInfo(Box::new(array)))
    }

    /// The bytes to send.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0[..]
    }
}

impl fmt::Debug for RootInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RootInfo({} bytes)", ROOT_INFO_BYTES)
    }
}

/// How an all-reduce or reduce-scatter combines the ranks' elements.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ReduceOp {
    /// Elementwise sum.
    Sum,
    /// Elementwise product.
    Prod,
    /// Elementwise maximum.
    Max,
    /// Elementwise minimum.
    Min,
    /// Elementwise mean over the ranks: the sum scaled by `1 / ranks` (the nearest `f32`).
    ///
    /// The order of rounding depends on the data type ([`ReduceOp::scales_before_sum`]). In
    /// `float16` and `bfloat16` each rank's value is scaled first and rounded to the type,
    /// then the scaled values are summed, each partial sum rounded, as NCCL's average does:
    /// three ranks holding 30000.0 in `float16` average to 30000.0, where their sum (90000)
    /// would overflow to infinity. In `float32` the values are summed (each partial sum
    /// rounded) and the sum is scaled and rounded once.
    ///
    /// HCCL has no average (`HcclReduceOp` is sum, prod, max, min): on HCCL it is a sum with,
    /// on the same stream, a scale by `1 / ranks` before it (of a copy of the send buffer)
    /// or after it (of the receive buffer); one call at braid's level either way.
    Avg,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    /// Combines two values (in `f32`; the caller rounds to the data type). An average
    /// combines as a sum; [`ReduceOp::scale`] gives the division.
    pub fn combine(self, a: f32, b: f32) -> f32 {
        match self {
            ReduceOp::Sum | ReduceOp::Avg => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
        }
    }

    /// Lower-case name (`sum`, `prod`, `max`, `min`).
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// The factor an average of `ranks` ranks applies: `1 / ranks` for an average, `None`
    /// for the others (nothing to apply). Where it applies, before or after the sum, is
    /// [`ReduceOp::scales_before_sum`].
    pub fn scale(self, ranks: u32) -> Option<f32> {
        match self {
            ReduceOp::Avg => Some(1.0 / ranks.max(1) as f32),
            _ => None,
        }
    }

    /// Whether this reduction in `dtype` scales each rank's value before the sum (an average
    /// in `float16` or `bfloat16`, whose sums overflow where the mean fits) rather than the
    /// sum (an average in `float32`). See [`ReduceOp::Avg`] for the order of rounding.
    pub fn scales_before_sum(self, dtype: DType) -> bool {
        self == ReduceOp::Avg && matches!(dtype, DType::F16 | DType::BF16)
    }
}

/// The operation of a collective call.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CollectiveOp {
    /// Every rank's `recv` gets the reduction of every rank's `send` (`count` elements).
    AllReduce(ReduceOp),
    /// Every rank's `recv` gets every rank's `send` (`count` elements each), in rank order.
    AllGather,
    /// Rank `r`'s `recv` gets block `r` (`count` elements) of the reduction of every rank's
    /// `send` (`count × ranks` elements).
    ReduceScatter(ReduceOp),
    /// Every rank's `recv` gets the root's `send` (`count` elements). On the root `send` and
    /// `recv` may be the same buffer (HCCL's in-place broadcast uses one buffer everywhere).
    Broadcast {
        /// The rank whose data is sent.
        root: u32,
    },
    /// This rank sends `send` (`count` elements) to `peer`, which posts the matching
    /// [`CollectiveOp::Recv`].
    Send {
        /// The receiving rank.
        peer: u32,
    },
    /// This rank receives `count` elements from `peer` into `recv`.
    Recv {
        /// The sending rank.
        peer: u32,
    },
    /// Block `j` (`count` elements) of rank `i`'s `send` goes to block `i` of rank `j`'s
    /// `recv`; both buffers hold `count × ranks` elements.
    AllToAll,
    /// No rank's stream goes past the barrier before every rank's has reached it
    /// (`HcclBarrier`): no buffers, a count of 0.
    Barrier,
    /// The root's `recv` gets the reduction of every rank's `send` (`count` elements each,
    /// `HcclReduce`); the other ranks' `recv` is neither read nor written.
    Reduce {
        /// How the elements combine.
        op: ReduceOp,
        /// The rank that receives the reduction.
        root: u32,
    },
    /// Block `r` (`count` elements) of the root's `send` (`count × ranks` elements) goes to
    /// rank `r`'s `recv` (`HcclScatter`). HCCL has no public gather (see `hccl/REFERENCE.md`
    /// in `braid-acl-sys`): an all-gather is the nearest call.
    Scatter {
        /// The rank whose data is scattered.
        root: u32,
    },
    /// Every rank's `recv` gets every rank's `send` at that rank's block of the receive
    /// counts and displacements ([`VCounts::recv`], the same on every rank;
    /// `HcclAllGatherV`): rank `r` sends `count` elements, which must be its receive count.
    AllGatherV,
    /// Rank `r`'s `recv` (`count` elements, its send count) gets the reduction of block `r`
    /// of every rank's `send` ([`VCounts::send`], the same on every rank;
    /// `HcclReduceScatterV`).
    ReduceScatterV(ReduceOp),
    /// Block `j` of rank `i`'s `send` ([`VCounts::send`]) goes to block `i` of rank `j`'s
    /// `recv` ([`VCounts::recv`]); rank `i`'s send count to `j` must be rank `j`'s receive
    /// count from `i` (`HcclAlltoAllV`). `count` is this rank's total send elements.
    AllToAllV,
}

impl CollectiveOp {
    /// The operation's name as HCCL spells it (`allreduce`, `allgather`, ...), for labels.
    pub const fn name(self) -> &'static str {
        match self {
            CollectiveOp::AllReduce(_) => "allreduce",
            CollectiveOp::AllGather => "allgather",
            CollectiveOp::ReduceScatter(_) => "reducescatter",
            CollectiveOp::Broadcast { .. } => "broadcast",
            CollectiveOp::Send { .. } => "send",
            CollectiveOp::Recv { .. } => "recv",
            CollectiveOp::AllToAll => "alltoall",
            CollectiveOp::Barrier => "barrier",
            CollectiveOp::Reduce { .. } => "reduce",
            CollectiveOp::Scatter { .. } => "scatter",
            CollectiveOp::AllGatherV => "allgatherv",
            CollectiveOp::ReduceScatterV(_) => "reducescatterv",
            CollectiveOp::AllToAllV => "alltoallv",
        }
    }

    /// Whether the operation reads a send buffer on this rank.
    pub fn reads_send(self, rank: u32) -> bool {
        match self {
            CollectiveOp::Recv { .. } | CollectiveOp::Barrier => false,
            CollectiveOp::Broadcast { root } | CollectiveOp::Scatter { root } => rank == root,
            _ => true,
        }
    }

    /// Whether the operation takes per-rank counts and displacements ([`VCounts`]).
    pub const fn is_variable(self) -> bool {
        matches!(
            self,
            CollectiveOp::AllGatherV | CollectiveOp::ReduceScatterV(_) | CollectiveOp::AllToAllV
        )
    }

    /// Whether the operation writes a receive buffer on this rank.
    pub fn writes_recv(self, rank: u32) -> bool {
        match self {
            CollectiveOp::Send { .. } | CollectiveOp::Barrier => false,
            CollectiveOp::Reduce { root, .. } => rank == root,
            _ => true,
        }
    }
}

impl fmt::Display for CollectiveOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectiveOp::AllReduce(op)
            | CollectiveOp::ReduceScatter(op)
            | CollectiveOp::ReduceScatterV(op) => {
                write!(f, "{}({})", self.name(), op.name())
            }
            CollectiveOp::Broadcast { root } => write!(f, "broadcast(root {root})"),
            CollectiveOp::Reduce { op, root } => write!(f, "reduce({}, root {root})", op.name()),
            CollectiveOp::Scatter { root } => write!(f, "scatter(root {root})"),
            CollectiveOp::Send { peer } => write!(f, "send(to {peer})"),
            CollectiveOp::Recv { peer } => write!(f, "recv(from {peer})"),
            _ => f.write_str(self.name()),
        }
    }
}

/// One rank's part of a collective: the operation, this rank's buffers, the element count
/// (HCCL's meaning: per rank for all-gather and reduce-scatter, see [`CollectiveCall::send_len`])
/// and the data type. Buffers are device addresses of this rank's device; `send` is ignored
/// where the operation sends nothing from this rank, `recv` where it receives nothing.
/// Variable-count operations ([`CollectiveOp::is_variable`]) carry their blocks in `v`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct CollectiveCall {
    /// The operation.
    pub op: CollectiveOp,
    /// This rank's input.
    pub send: DevicePtr,
    /// This rank's output.
    pub recv: DevicePtr,
    /// Element count (see [`CollectiveCall::send_len`] for its meaning per operation).
    pub count: u64,
    /// Element type.
    pub dtype: DType,
    /// The per-rank blocks of a variable-count operation (`None` for the others).
    pub v: Option<Arc<VCounts>>,
}

impl CollectiveCall {
    /// A call without per-rank blocks (every operation but the variable-count ones).
    pub fn new(
        op: CollectiveOp,
        send: DevicePtr,
        recv: DevicePtr,
        count: u64,
        dtype: DType,
    ) -> Self {
        CollectiveCall {
            op,
            send,
            recv,
            count,
            dtype,
            v: None,
        }
    }

    /// A variable-count call (`AllGatherV`, `ReduceScatterV`, `AllToAllV`) with its per-rank
    /// blocks `v`.
    pub fn variable(
        op: CollectiveOp,
        send: DevicePtr,
        recv: DevicePtr,
        count: u64,
        dtype: DType,
        v: VCounts,
    ) -> Self {
        CollectiveCall {
            v: Some(Arc::new(v)),
            ..CollectiveCall::new(op, send, recv, count, dtype)
        }
    }

    /// The bytes a variable-count operation's `side` blocks span (`None` when the
    /// operation has no blocks there, or on overflow).
    fn extent(&self, side: fn(&VCounts) -> &Blocks) -> Option<u64> {
        let blocks = side(self.v.as_deref()?);
        let mut extent = 0u64;
        for (count, displ) in blocks.counts.iter().zip(&blocks.displs) {
            if *count > 0 {
                let end = displ.checked_add(*count)?.checked_mul(self.dtype.size())?;
                extent = extent.max(end);
            }
        }
        Some(extent)
    }

    /// Bytes this rank's `send` buffer must hold in a communicator of `ranks` ranks (0 where
    /// it sends nothing): `count` elements, times `ranks` for reduce-scatter and all-to-all;
    /// the end of the furthest non-empty send block for reduce-scatter-v and all-to-all-v.
    /// `None` on overflow (or a variable-count call without blocks).
    pub fn send_len(&self, rank: u32, ranks: u32) -> Option<u64> {
        if !self.op.reads_send(rank) {
            return Some(0);
        }
        if matches!(
            self.op,
            CollectiveOp::ReduceScatterV(_) | CollectiveOp::AllToAllV
        ) {
            return self.extent(|v| &v.send);
        }
        let elements = match self.op {
            CollectiveOp::ReduceScatter(_)
            | CollectiveOp::AllToAll
            | CollectiveOp::Scatter { .. } => self.count.checked_mul(u64::from(ranks))?,
            _ => self.count,
        };
        elements.checked_mul(self.dtype.size())
    }

    /// Bytes rank `rank`'s `recv` buffer must hold in a communicator of `ranks` ranks (0 where it
    /// receives nothing): `count` elements, times `ranks` for all-gather and all-to-all;
    /// the end of the furthest non-empty receive block for all-gather-v and all-to-all-v.
    /// `None` on overflow (or a variable-count call without blocks).
    pub fn recv_len(&self, rank: u32, ranks: u32) -> Option<u64> {
        if !self.op.writes_recv(rank) {
            return Some(0);
        }
        if matches!(self.op, CollectiveOp::AllGatherV | CollectiveOp::AllToAllV) {
            return self.extent(|v| &v.recv);
        }
        let elements = match self.op {
            CollectiveOp::AllGather | CollectiveOp::AllToAll => {
                self.count.checked_mul(u64::from(ranks))?
            }
            _ => self.count,
        };
        elements.checked_mul(self.dtype.size())
    }

    /// This rank's send and receive ranges in a communicator of `ranks` ranks (of
    /// [`CollectiveCall::send_len`] and [`CollectiveCall::recv_len`] bytes, empty where the
    /// operation sends or receives nothing). `None` on overflow.
    pub fn ranges(&self, rank: u32, ranks: u32) -> Option<(DeviceSlice, DeviceSlice)> {
        Some((
            DeviceSlice::new(self.send, self.send_len(rank, ranks)?),
            DeviceSlice::new(self.recv, self.recv_len(rank, ranks)?),
        ))
    }

    /// What every rank must agree on. For all-gather-v and reduce-scatter-v the count is
    /// the total of the shared blocks (each rank's own count is its block there); for
    /// all-to-all-v this rank's total send elements.
    pub fn signature(&self) -> Signature {
        let count = match (self.op, self.v.as_deref()) {
            (CollectiveOp::AllGatherV, Some(v)) => v.recv.total(),
            (CollectiveOp::ReduceScatterV(_), Some(v)) => v.send.total(),
            _ => self.count,
        };
        Signature {
            op: self.op,
            count,
            dtype: self.dtype,
            v: self.v.clone(),
        }
    }
}

/// What the ranks of a communicator must agree on for their calls to match: the operation
/// (with its reduction or root), the element count and the data type. Send and receive
/// match each other by peer: rank `a`'s `Send { peer: b }` pairs with rank `b`'s
/// `Recv { peer: a }` ([`Signature::pairs_with`]). Variable-count operations match on their
/// blocks too (see [`VCounts`]).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Signature {
    /// The operation.
    pub op: CollectiveOp,
    /// Element count.
    pub count: u64,
    /// Element type.
    pub dtype: DType,
    /// The per-rank blocks of a variable-count operation (`None` for the others).
    pub v: Option<Arc<VCounts>>,
}

impl Signature {
    /// Whether this rank's (`rank`) call and `other`'s (issued by rank `other_rank`) belong to
    /// one collective: equal signatures, or a send and the matching receive.
    pub fn pairs_with(&self, rank: u32, other: &Signature, other_rank: u32) -> bool {
        match (self.op, other.op) {
            (CollectiveOp::Send { peer }, CollectiveOp::Recv { peer: from })
            | (CollectiveOp::Recv { peer: from }, CollectiveOp::Send { peer }) => {
                let (sender, receiver) = if matches!(self.op, CollectiveOp::Send { .. }) {
                    (rank, other_rank)
                } else {
                    (other_rank, rank)
                };
                peer == receiver
                    && from == sender
                    && self.count == other.count
                    && self.dtype == other.dtype
            }
            (CollectiveOp::AllToAllV, CollectiveOp::AllToAllV) => {
                self.dtype == other.dtype
                    && match (self.v.as_deref(), other.v.as_deref()) {
                        (Some(a), Some(b)) => {
                            a.all_to_all_difference(rank, b, other_rank).is_none()
                        }
                        (a, b) => a == b,
                    }
            }
            _ => self == other,
        }
    }

    /// A short description of how `other` differs from this signature (empty when equal).
    pub fn difference(&self, other: &Signature) -> String {
        let mut parts = Vec::new();
        if self.op != other.op {
            parts.push(format!("operation {} vs {}", self.op, other.op));
        }
        if self.count != other.count {
            parts.push(format!("count {} vs {}", self.count, other.count));
        }
        if self.dtype != other.dtype {
            parts.push(format!("data type {} vs {}", self.dtype, other.dtype));
        }
        if self.op == other.op && self.op != CollectiveOp::AllToAllV {
            match (self.v.as_deref(), other.v.as_deref()) {
                (Some(a), Some(b)) => parts.extend(a.difference(b)),
                (None, None) => {}
                _ => parts.push("per-rank blocks given by one call only".to_string()),
            }
        }
        parts.join(", ")
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} × {}", self.op, self.count, self.dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(op: CollectiveOp, count: u64) -> CollectiveCall {
        CollectiveCall::new(op, DevicePtr(0x100), DevicePtr(0x200), count, DType::F16)
    }

    #[test]
    fn an_average_combines_as_a_sum_and_scales_by_the_rank_count() {
        assert_eq!(ReduceOp::Avg.combine(2.0, 3.0), 5.0);
        assert_eq!(ReduceOp::Avg.scale(4), Some(0.25));
        assert_eq!(ReduceOp::Sum.scale(4), None);
        assert!(ReduceOp::Avg.scales_before_sum(DType::F16));
        assert!(ReduceOp::Avg.scales_before_sum(DType::BF16));
        assert!(!ReduceOp::Avg.scales_before_sum(DType::F32));
        assert!(!ReduceOp::Sum.scales_before_sum(DType::F16));
        assert_eq!(ReduceOp::Avg.name(), "avg");
        assert!(ReduceOp::ALL.contains(&ReduceOp::Avg));
    }

    #[test]
    fn a_barrier_uses_no_buffer() {
        let b = call(CollectiveOp::Barrier, 0);
        assert_eq!((b.send_len(0, 4), b.recv_len(0, 4)), (Some(0), Some(0)));
        assert_eq!(CollectiveOp::Barrier.to_string(), "barrier");
    }

    #[test]
    fn a_reduce_writes_only_the_root_s_receive_buffer() {
        let op = CollectiveOp::Reduce {
            op: ReduceOp::Max,
            root: 2,
        };
        let r = call(op, 8);
        assert_eq!((r.send_len(0, 4), r.recv_len(0, 4)), (Some(16), Some(0)));
        assert_eq!((r.send_len(2, 4), r.recv_len(2, 4)), (Some(16), Some(16)));
        assert_eq!(op.to_string(), "reduce(max, root 2)");
    }

    #[test]
    fn a_scatter_reads_the_root_s_whole_send_buffer() {
        let s = call(CollectiveOp::Scatter { root: 1 }, 8);
        assert_eq!((s.send_len(1, 4), s.recv_len(1, 4)), (Some(64), Some(16)));
        assert_eq!((s.send_len(0, 4), s.recv_len(0, 4)), (Some(0), Some(16)));
    }

    fn v_call(op: CollectiveOp, count: u64, v: VCounts) -> CollectiveCall {
        CollectiveCall::variable(op, DevicePtr(0x100), DevicePtr(0x200), count, DType::F16, v)
    }

    #[test]
    fn variable_counts_size_buffers_by_their_furthest_block() {
        let blocks = Blocks {
            counts: vec![2, 0, 3],
            displs: vec![4, 100, 0],
        };
        let ag = v_call(
            CollectiveOp::AllGatherV,
            3,
            VCounts {
                recv: blocks.clone(),
                ..VCounts::default()
            },
        );
        // An empty block does not count; the send is this rank's count.
        assert_eq!((ag.send_len(2, 3), ag.recv_len(2, 3)), (Some(6), Some(12)));
        assert_eq!(ag.signature().count, 5);
        let rs = v_call(
            CollectiveOp::ReduceScatterV(ReduceOp::Sum),
            2,
            VCounts {
                send: blocks.clone(),
                ..VCounts::default()
            },
        );
        assert_eq!((rs.send_len(0, 3), rs.recv_len(0, 3)), (Some(12), Some(4)));
        let a2a = v_call(
            CollectiveOp::AllToAllV,
            5,
            VCounts {
                send: blocks.clone(),
                recv: Blocks::packed(&[1, 1, 1]),
            },
        );
        assert_eq!(
            (a2a.send_len(0, 3), a2a.recv_len(0, 3)),
            (Some(12), Some(6))
        );
        // Without blocks a variable-count call has no size.
        assert_eq!(call(CollectiveOp::AllToAllV, 5).send_len(0, 3), None);
        assert!(CollectiveOp::AllToAllV.is_variable() && !CollectiveOp::AllToAll.is_variable());
        assert_eq!(
            CollectiveOp::ReduceScatterV(ReduceOp::Max).to_string(),
            "reducescatterv(max)"
        );
    }

    #[test]
    fn variable_count_signatures_compare_their_blocks() {
        let v = |counts: &[u64]| VCounts {
            recv: Blocks::packed(counts),
            ..VCounts::default()
        };
        let a = v_call(CollectiveOp::AllGatherV, 1, v(&[1, 2])).signature();
        // Each rank's own count differs; the blocks are what must agree.
        let b = v_call(CollectiveOp::AllGatherV, 2, v(&[1, 2])).signature();
        assert!(a.pairs_with(0, &b, 1));
        let c = v_call(CollectiveOp::AllGatherV, 2, v(&[2, 2])).signature();
        assert!(!a.pairs_with(0, &c, 1));
        assert_eq!(
            a.difference(&c),
            "count 3 vs 4, receive block of rank 0: 1 element(s) at offset 0 vs 2 element(s) at offset 0"
        );
    }

    #[test]
    fn buffer_lengths_follow_hccl_counts() {
        let ar = call(CollectiveOp::AllReduce(ReduceOp::Sum), 8);
        assert_eq!((ar.send_len(0, 4), ar.recv_len(0, 4)), (Some(16), Some(16)));
        let ag = call(CollectiveOp::AllGather, 8);
        assert_eq!((ag.send_len(1, 4), ag.recv_len(0, 4)), (Some(16), Some(64)));
        let rs = call(CollectiveOp::ReduceScatter(ReduceOp::Max), 8);
        assert_eq!((rs.send_len(1, 4), rs.recv_len(0, 4)), (Some(64), Some(16)));
        let bc = call(CollectiveOp::Broadcast { root: 2 }, 8);
        assert_eq!((bc.send_len(2, 4), bc.send_len(1, 4)), (Some(16), Some(0)));
        let send = call(CollectiveOp::Send { peer: 1 }, 8);
        assert_eq!(
            (send.send_len(0, 2), send.recv_len(0, 2)),
            (Some(16), Some(0))
        );
        let recv = call(CollectiveOp::Recv { peer: 0 }, 8);
        assert_eq!(
            (recv.send_len(1, 2), recv.recv_len(0, 2)),
            (Some(0), Some(16))
        );
        let a2a = call(CollectiveOp::AllToAll, 8);
        assert_eq!(
            (a2a.send_len(0, 4), a2a.recv_len(0, 4)),
            (Some(64), Some(64))
        );
        assert_eq!(
            recv.ranges(1, 2),
            Some((
                DeviceSlice::new(DevicePtr(0x100), 0),
                DeviceSlice::new(DevicePtr(0x200), 16)
            ))
        );
        assert_eq!(call(CollectiveOp::AllGather, u64::MAX).ranges(0, 2), None);
        assert_eq!(call(CollectiveOp::AllGather, u64::MAX).recv_len(0, 2), None);
    }

    #[test]
    fn signatures_pair_sends_with_their_receives() {
        let send = call(CollectiveOp::Send { peer: 1 }, 8).signature();
        let recv = call(CollectiveOp::Recv { peer: 0 }, 8).signature();
        assert!(send.pairs_with(0, &recv, 1));
        assert!(recv.pairs_with(1, &send, 0));
        let wrong_peer = call(CollectiveOp::Recv { peer: 2 }, 8).signature();
        assert!(!send.pairs_with(0, &wrong_peer, 1));
        let a = call(CollectiveOp::AllReduce(ReduceOp::Sum), 8).signature();
        let b = call(CollectiveOp::AllReduce(ReduceOp::Max), 4).signature();
        assert!(!a.pairs_with(0, &b, 1));
        assert_eq!(
            a.difference(&b),
            "operation allreduce(sum) vs allreduce(max), count 8 vs 4"
        );
    }
}
