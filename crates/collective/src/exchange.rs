//! [`SignatureExchange`]: the mismatch check of a root-info communicator, whose ranks live in
//! other processes or on other nodes. Before each collective every rank all-gathers the
//! call's [`Signature`] through the communicator itself, on a side stream of its device, waits
//! for it, and compares: a mismatch is refused on every rank alike, before the real
//! collective is enqueued. The traffic is the backend's own (HCCL's transport across nodes),
//! so it works wherever the communicator does.
//!
//! The cost: one all-gather of [`SIGNATURE_WORDS`] `f32`s per rank and a host wait on it for
//! every collective, so every collective becomes a host synchronization point of all ranks.
//! A debugging aid, off by default ([`crate::CommOptions::exchange_signatures`]).

use crate::error::{CollectiveError, Result};
use crate::ledger::MismatchCheck;
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp, Signature};
use braid_stream_core::hal::{CollectiveBackend, HalError};
use braid_stream_core::sync::Mutex;
use braid_stream_core::{DType, Device, DeviceMemory, Stream};
use std::sync::Arc;

/// `f32` words of an encoded signature, each holding 16 bits (exact in `f32`): operation,
/// its parameter (reduction, root or peer) in two words, the count in four, the data type.
pub(crate) const SIGNATURE_WORDS: usize = 8;

/// The label of the exchange's all-gather.
const LABEL: &str = "signature exchange";

/// The check that exchanges every collective's signature between the ranks through the
/// communicator (see the module documentation). Sends and receives are not checked: only the
/// two ranks of a pair issue them, so no all-gather can run for them.
pub(crate) struct SignatureExchange<B: CollectiveBackend> {
    rank: u32,
    ranks: u32,
    comm: Arc<B::Comm>,
    /// The side stream the exchanges run on.
    stream: Stream<B>,
    /// This rank's encoded signature.
    send: DeviceMemory<B>,
    /// Every rank's, in rank order.
    recv: DeviceMemory<B>,
    /// Index of this rank's next checked collective; held across the exchange and the launch
    /// so that one rank's calls from several threads are exchanged in the order they launch.
    next: Mutex<u64>,
    /// The user's check, which admits what the exchange let through.
    then: Option<Arc<dyn MismatchCheck>>,
}

impl<B: CollectiveBackend> SignatureExchange<B> {
    /// The exchange of rank `rank` of `ranks` on `device`: a side stream and two small
    /// buffers of the device.
    pub(crate) fn new(
        device: &Device<B>,
        rank: u32,
        ranks: u32,
        comm: Arc<B::Comm>,
    ) -> Result<Self> {
        let bytes = SIGNATURE_WORDS as u64 * DType::F32.size();
        Ok(SignatureExchange {
            rank,
            ranks,
            comm,
            stream: device.create_stream(0)?,
            send: device.alloc(bytes)?,
            recv: device.alloc(bytes * u64::from(ranks))?,
            next: Mutex::new(0),
            then: None,
        })
    }

    /// This exchange, handing the calls it lets through to `check` (when given) instead of
    /// launching them itself.
    pub(crate) fn then(self, check: Option<Arc<dyn MismatchCheck>>) -> Self {
        SignatureExchange {
            then: check,
            ..self
        }
    }

    /// Launches a call the exchange let through, through the user's check if there is one.
    fn pass(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        match &self.then {
            Some(check) => check.admit(rank, signature, launch),
            None => launch(),
        }
    }

    /// Every rank's signature of this call, in rank order.
    fn gather(&self, signature: &Signature) -> Result<Vec<Signature>> {
        let send = self.send.slice();
        let recv = self.recv.slice();
        self.stream
            .copy_h2d(send, DType::F32.encode(&encode(signature)))?;
        let call = CollectiveCall {
            op: CollectiveOp::AllGather,
            send: send.ptr,
            recv: recv.ptr,
            count: SIGNATURE_WORDS as u64,
            dtype: DType::F32,
            v: None,
        };
        self.stream.launch_collective(&self.comm, &call, LABEL)?;
        let words = self.stream.copy_d2h(recv)?.wait_as(DType::F32)?;
        words
            .chunks_exact(SIGNATURE_WORDS)
            .zip(0..)
            .map(|(words, rank)| {
                decode(words).ok_or_else(|| CollectiveError::Backend {
                    call: LABEL,
                    source: HalError::InvalidArgument(format!(
                        "rank {rank}'s signature did not arrive intact: {words:?}"
                    )),
                })
            })
            .collect()
    }
}

impl<B: CollectiveBackend> MismatchCheck for SignatureExchange<B> {
    /// Exchanges `signature` with every rank and refuses the call on every rank when any
    /// rank's differs from rank 0's, naming the first such rank; sends and receives pass
    /// unchecked.
    fn admit(
        &self,
        rank: u32,
        signature: &Signature,
        launch: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        debug_assert_eq!(rank, self.rank);
        if matches!(
            signature.op,
            CollectiveOp::Send { .. } | CollectiveOp::Recv { .. }
        ) {
            return self.pass(rank, signature, launch);
        }
        let mut next = self.next.lock();
        let all = self.gather(signature)?;
        debug_assert_eq!(all.len(), self.ranks as usize);
        if let Some(other) = (1..).zip(&all[1..]).find(|(_, s)| **s != all[0]) {
            let (other_rank, found) = other;
            return Err(CollectiveError::Mismatch {
                rank: other_rank,
                call: *next,
                expected_rank: 0,
                expected: all[0].clone(),
                found: found.clone(),
                difference: exchanged_difference(&all[0], found),
            });
        }
        self.pass(rank, signature, launch)?;
        *next += 1;
        Ok(())
    }
}

/// The operation's code and parameter.
fn op_code(op: CollectiveOp) -> (u16, u32) {
    let reduction = |r: ReduceOp| ReduceOp::ALL.iter().position(|x| *x == r).unwrap_or(0) as u32;
    match op {
        CollectiveOp::AllReduce(r) => (1, reduction(r)),
        CollectiveOp::AllGather => (2, 0),
        CollectiveOp::ReduceScatter(r) => (3, reduction(r)),
        CollectiveOp::Broadcast { root } => (4, root),
        CollectiveOp::Send { peer } => (5, peer),
        CollectiveOp::Recv { peer } => (6, peer),
        CollectiveOp::AllToAll => (7, 0),
        CollectiveOp::Barrier => (8, 0),
        CollectiveOp::Scatter { root } => (10, root),
        // The root above the reduction's index (at most 8 reductions).
        CollectiveOp::Reduce { op, root } => (9, root.saturating_mul(8) | reduction(op)),
        CollectiveOp::AllGatherV => (11, 0),
        CollectiveOp::ReduceScatterV(r) => (12, reduction(r)),
        CollectiveOp::AllToAllV => (13, 0),
    }
}

/// The operation of a code and parameter, `None` for one [`op_code`] never makes.
fn op_of(code: u16, param: u32) -> Option<CollectiveOp> {
    let reduction = || ReduceOp::ALL.get(param as usize).copied();
    Some(match code {
        1 => CollectiveOp::AllReduce(reduction()?),
        2 => CollectiveOp::AllGather,
        3 => CollectiveOp::ReduceScatter(reduction()?),
        4 => CollectiveOp::Broadcast { root: param },
        5 => CollectiveOp::Send { peer: param },
        6 => CollectiveOp::Recv { peer: param },
        7 => CollectiveOp::AllToAll,
        8 => CollectiveOp::Barrier,
        10 => CollectiveOp::Scatter { root: param },
        9 => CollectiveOp::Reduce {
            op: ReduceOp::ALL.get((param % 8) as usize).copied()?,
            root: param / 8,
        },
        11 => CollectiveOp::AllGatherV,
        12 => CollectiveOp::ReduceScatterV(reduction()?),
        13 => CollectiveOp::AllToAllV,
        _ => return None,
    })
}

/// `signature` as [`SIGNATURE_WORDS`] words of 16 bits.
fn encode(signature: &Signature) -> [f32; SIGNATURE_WORDS] {
    let (code, param) = op_code(signature.op);
    let dtype = DType::ALL
        .iter()
        .position(|d| *d == signature.dtype)
        .unwrap_or(0);
    let count = count_word(signature);
    let word = |x: u64| f32::from((x & 0xFFFF) as u16);
    [
        f32::from(code),
        word(u64::from(param)),
        word(u64::from(param) >> 16),
        word(count),
        word(count >> 16),
        word(count >> 32),
        word(count >> 48),
        word(dtype as u64),
    ]
}

/// What the count words carry: the count, or for a variable-count operation a digest of
/// the blocks every rank must pass alike (64-bit FNV-1a of the counts and displacements;
/// eight words cannot carry the blocks themselves). An all-to-all-v's counts differ per rank
/// by design and pair up only between two ranks' parts, which this exchange of equal
/// signatures cannot check: its count words are 0, so only its operation and type are
/// compared across processes.
fn count_word(signature: &Signature) -> u64 {
    let Some(v) = signature.v.as_deref() else {
        return signature.count;
    };
    if signature.op == CollectiveOp::AllToAllV {
        return 0;
    }
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for blocks in [&v.send, &v.recv] {
        let words = [blocks.counts.len() as u64].into_iter();
        for x in words
            .chain(blocks.counts.iter().copied())
            .chain(blocks.displs.iter().copied())
        {
            for byte in x.to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    hash
}

/// How two exchanged signatures differ: for variable-count calls of one operation and type,
/// their blocks (seen only as digests here).
fn exchanged_difference(expected: &Signature, found: &Signature) -> String {
    if found.op.is_variable() && found.op == expected.op && found.dtype == expected.dtype {
        return "per-rank counts or displacements differ (every rank must pass the same blocks)"
            .to_string();
    }
    expected.difference(found)
}

/// The signature [`encode`] made of `words`, `None` for anything else.
fn decode(words: &[f32]) -> Option<Signature> {
    if words.len() != SIGNATURE_WORDS {
        return None;
    }
    let mut halves = [0u64; SIGNATURE_WORDS];
    for (half, word) in halves.iter_mut().zip(words) {
        if !(0.0..=65535.0).contains(word) || word.fract() != 0.0 {
            return None;
        }
        *half = *word as u64;
    }
    let param = (halves[1] | halves[2] << 16) as u32;
    let count = halves[3] | halves[4] << 16 | halves[5] << 32 | halves[6] << 48;
    Some(Signature {
        op: op_of(halves[0] as u16, param)?,
        count,
        dtype: *DType::ALL.get(halves[7] as usize)?,
        v: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signature_survives_its_encoding() {
        let ops = [
            CollectiveOp::AllReduce(ReduceOp::Min),
            CollectiveOp::AllReduce(ReduceOp::Avg),
            CollectiveOp::AllGather,
            CollectiveOp::ReduceScatter(ReduceOp::Prod),
            CollectiveOp::Broadcast { root: 70_000 },
            CollectiveOp::Send { peer: u32::MAX },
            CollectiveOp::Recv { peer: 3 },
            CollectiveOp::AllToAll,
            CollectiveOp::Barrier,
            CollectiveOp::Reduce {
                op: ReduceOp::Avg,
                root: 3,
            },
            CollectiveOp::Scatter { root: 70_000 },
            CollectiveOp::ReduceScatterV(ReduceOp::Max),
        ];
        for op in ops {
            for dtype in DType::ALL {
                for count in [1, 0xFFFF, 0x1_0000, u64::MAX] {
                    let signature = Signature {
                        op,
                        count,
                        dtype,
                        v: None,
                    };
                    assert_eq!(decode(&encode(&signature)), Some(signature));
                }
            }
        }
    }

    #[test]
    fn variable_count_signatures_exchange_a_digest_of_their_blocks() {
        use braid_stream_core::collective::{Blocks, VCounts};
        let sig = |counts: &[u64]| Signature {
            op: CollectiveOp::AllGatherV,
            count: counts.iter().sum(),
            dtype: DType::F16,
            v: Some(Arc::new(VCounts {
                recv: Blocks::packed(counts),
                ..VCounts::default()
            })),
        };
        let (a, b) = (
            decode(&encode(&sig(&[1, 2]))),
            decode(&encode(&sig(&[2, 1]))),
        );
        assert_eq!(a, decode(&encode(&sig(&[1, 2]))));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_ne!(a, b, "same total, other blocks: the digests differ");
        assert!(exchanged_difference(&a, &b).contains("counts or displacements"));
        // An all-to-all-v's counts differ per rank by design: only operation and type.
        let a2a = |counts: &[u64]| Signature {
            op: CollectiveOp::AllToAllV,
            ..sig(counts)
        };
        assert_eq!(encode(&a2a(&[1, 2])), encode(&a2a(&[5, 0])));
    }

    #[test]
    fn words_no_signature_encodes_to_are_refused() {
        let good = encode(&Signature {
            op: CollectiveOp::AllGather,
            count: 4,
            dtype: DType::F16,
            v: None,
        });
        for (i, bad) in [
            (0, 0.0),
            (0, 999.0),
            (1, 0.5),
            (3, -1.0),
            (7, 13.0),
            (4, 65536.0),
        ] {
            let mut words = good;
            words[i] = bad;
            assert_eq!(decode(&words), None, "word {i} = {bad}");
        }
        let mut words = encode(&Signature {
            op: CollectiveOp::AllReduce(ReduceOp::Sum),
            count: 1,
            dtype: DType::F32,
            v: None,
        });
        words[1] = ReduceOp::ALL.len() as f32;
        assert_eq!(decode(&words), None, "a reduction past the last");
        assert_eq!(decode(&good[..4]), None, "too few words");
    }
}
