//! Variable-count collectives (HCCL's `HcclAllGatherV`, `HcclReduceScatterV`,
//! `HcclAlltoAllV`): where each rank's block lies in a buffer ([`Blocks`]: one element count
//! and one element displacement per rank, as HCCL's `u64` arrays) and what one rank's call
//! carries ([`VCounts`]).
//!
//! What the ranks must agree on follows HCCL's documented constraints: every rank of an
//! all-gather-v passes the same receive counts and displacements, every rank of a
//! reduce-scatter-v the same send counts and displacements; an all-to-all-v pairs rank `i`'s
//! send count to `j` with rank `j`'s receive count from `i` (displacements are each rank's
//! own business there).

use crate::dtype::DType;
use std::fmt;

/// One block per rank of a buffer: `counts[r]` elements at element offset `displs[r]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Blocks {
    /// Elements of each rank's block.
    pub counts: Vec<u64>,
    /// Element offset of each rank's block from the start of the buffer.
    pub displs: Vec<u64>,
}

/// Why a [`Blocks`] does not describe a valid layout for a communicator.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BlocksError {
    /// Counts or displacements do not give one entry per rank.
    #[error("{what} has {found} entries; a communicator of {ranks} ranks needs one per rank")]
    Length {
        /// `counts` or `displs`.
        what: &'static str,
        /// Entries given.
        found: usize,
        /// Ranks of the communicator.
        ranks: u32,
    },
    /// A block's end does not fit in 64 bits of bytes.
    #[error("rank {rank}'s block ({count} elements at offset {displ}) overflows 64 bits of bytes")]
    Overflow {
        /// The block's rank.
        rank: u32,
        /// Its count.
        count: u64,
        /// Its displacement.
        displ: u64,
    },
    /// Two non-empty blocks of a buffer that is written overlap (the result would depend on
    /// which lands last).
    #[error(
        "the blocks of ranks {first} and {second} overlap; give written blocks disjoint ranges"
    )]
    Overlap {
        /// The lower rank.
        first: u32,
        /// The higher rank.
        second: u32,
    },
}

impl Blocks {
    /// Blocks of `counts` elements laid end to end (displacements are the running sums).
    pub fn packed(counts: &[u64]) -> Blocks {
        let mut at = 0u64;
        let displs = counts
            .iter()
            .map(|c| {
                let d = at;
                at = at.saturating_add(*c);
                d
            })
            .collect();
        Blocks {
            counts: counts.to_vec(),
            displs,
        }
    }

    /// Whether there is no block (an operation that uses no blocks on this side).
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.displs.is_empty()
    }

    /// Rank `rank`'s count and displacement, if it has a block.
    pub fn block(&self, rank: usize) -> Option<(u64, u64)> {
        Some((*self.counts.get(rank)?, *self.displs.get(rank)?))
    }

    /// Elements of every block together.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |t, c| t.saturating_add(*c))
    }

    /// Elements of the largest block.
    pub fn largest(&self) -> u64 {
        self.counts.iter().copied().max().unwrap_or(0)
    }

    /// Checks one block per rank of `ranks`, and that no block's end overflows bytes of
    /// `dtype`; with `disjoint`, that no two non-empty blocks overlap (a written buffer).
    /// Returns the bytes the buffer must hold: the end of the furthest block.
    pub fn check(&self, ranks: u32, dtype: DType, disjoint: bool) -> Result<u64, BlocksError> {
        for (what, found) in [("counts", self.counts.len()), ("displs", self.displs.len())] {
            if found != ranks as usize {
                return Err(BlocksError::Length { what, found, ranks });
            }
        }
        let mut extent = 0u64;
        let mut spans = Vec::with_capacity(self.counts.len());
        for (rank, (&count, &displ)) in (0u32..).zip(self.counts.iter().zip(&self.displs)) {
            let end = displ
                .checked_add(count)
                .and_then(|e| e.checked_mul(dtype.size()))
                .ok_or(BlocksError::Overflow { rank, count, displ })?;
            extent = extent.max(if count == 0 { 0 } else { end });
            if count > 0 {
                spans.push((displ, displ + count, rank));
            }
        }
        if disjoint {
            spans.sort_unstable();
            if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
                let (a, b) = (w[0].2.min(w[1].2), w[0].2.max(w[1].2));
                return Err(BlocksError::Overlap {
                    first: a,
                    second: b,
                });
            }
        }
        Ok(extent)
    }
}

impl fmt::Display for Blocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "counts {:?} at {:?}", self.counts, self.displs)
    }
}

/// The per-rank blocks one rank passes to a variable-count collective: its send buffer's
/// (reduce-scatter-v, all-to-all-v) and its receive buffer's (all-gather-v, all-to-all-v);
/// the side an operation does not use is empty.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct VCounts {
    /// The block of the send buffer destined to each rank.
    pub send: Blocks,
    /// The block of the receive buffer filled from each rank.
    pub recv: Blocks,
}

impl VCounts {
    /// How rank `rank`'s all-to-all-v counts (`self`) and rank `other_rank`'s (`other`)
    /// disagree, if they do: what one sends the other must expect.
    pub fn all_to_all_difference(
        &self,
        rank: u32,
        other: &VCounts,
        other_rank: u32,
    ) -> Option<String> {
        let sends = self.send.counts.get(other_rank as usize);
        let expects = other.recv.counts.get(rank as usize);
        if sends != expects {
            return Some(format!(
                "rank {rank} sends {} element(s) to rank {other_rank}, which expects {}",
                shown(sends),
                shown(expects)
            ));
        }
        let receives = self.recv.counts.get(other_rank as usize);
        let sent = other.send.counts.get(rank as usize);
        if receives != sent {
            return Some(format!(
                "rank {rank} expects {} element(s) from rank {other_rank}, which sends {}",
                shown(receives),
                shown(sent)
            ));
        }
        None
    }

    /// How `other` differs from these counts, where every rank must pass the same blocks
    /// (all-gather-v, reduce-scatter-v): the first differing rank's block, or the lengths.
    pub fn difference(&self, other: &VCounts) -> Option<String> {
        for (side, a, b) in [
            ("send", &self.send, &other.send),
            ("receive", &self.recv, &other.recv),
        ] {
            if a == b {
                continue;
            }
            let ranks = a
                .counts
                .len()
                .max(b.counts.len())
                .max(a.displs.len())
                .max(b.displs.len());
            for r in 0..ranks {
                let (x, y) = (a.block(r), b.block(r));
                if x != y {
                    return Some(format!(
                        "{side} block of rank {r}: {} vs {}",
                        block_text(x),
                        block_text(y)
                    ));
                }
            }
            return Some(format!("{side} blocks {a} vs {b}"));
        }
        None
    }
}

fn shown(count: Option<&u64>) -> String {
    count.map_or_else(|| "nothing (no such entry)".to_string(), u64::to_string)
}

fn block_text(block: Option<(u64, u64)>) -> String {
    match block {
        Some((count, displ)) => format!("{count} element(s) at offset {displ}"),
        None => "none".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_blocks_lie_end_to_end() {
        let b = Blocks::packed(&[2, 0, 3]);
        assert_eq!(b.displs, vec![0, 2, 2]);
        assert_eq!((b.total(), b.largest()), (5, 3));
        assert_eq!(b.check(3, DType::F32, true), Ok(20));
    }

    #[test]
    fn a_layout_is_checked_against_the_ranks_and_the_type() {
        let b = Blocks::packed(&[1, 1]);
        assert_eq!(
            b.check(3, DType::F32, false),
            Err(BlocksError::Length {
                what: "counts",
                found: 2,
                ranks: 3
            })
        );
        let huge = Blocks {
            counts: vec![1, u64::MAX / 2],
            displs: vec![0, 1],
        };
        assert!(matches!(
            huge.check(2, DType::F32, false),
            Err(BlocksError::Overflow { rank: 1, .. })
        ));
        let overlapping = Blocks {
            counts: vec![4, 2, 0],
            displs: vec![0, 3, 1],
        };
        // Empty blocks overlap nothing; reading overlapping blocks is fine.
        assert_eq!(overlapping.check(3, DType::F16, false), Ok(10));
        let err = overlapping.check(3, DType::F16, true).unwrap_err();
        assert_eq!(
            err,
            BlocksError::Overlap {
                first: 0,
                second: 1
            }
        );
        assert!(err.to_string().contains("disjoint"), "{err}");
    }

    #[test]
    fn differences_name_the_rank_and_the_block() {
        let a = VCounts {
            recv: Blocks::packed(&[1, 2]),
            ..VCounts::default()
        };
        let b = VCounts {
            recv: Blocks::packed(&[1, 3]),
            ..VCounts::default()
        };
        assert_eq!(a.difference(&a), None);
        assert_eq!(
            a.difference(&b).as_deref(),
            Some("receive block of rank 1: 2 element(s) at offset 1 vs 3 element(s) at offset 1")
        );
        let r0 = VCounts {
            send: Blocks::packed(&[1, 2]),
            recv: Blocks::packed(&[1, 5]),
        };
        let r1 = VCounts {
            send: Blocks::packed(&[5, 0]),
            recv: Blocks::packed(&[3, 0]),
        };
        assert_eq!(
            r0.all_to_all_difference(0, &r1, 1).as_deref(),
            Some("rank 0 sends 2 element(s) to rank 1, which expects 3")
        );
        let r1_fixed = VCounts {
            recv: Blocks::packed(&[2, 0]),
            ..r1
        };
        assert_eq!(r0.all_to_all_difference(0, &r1_fixed, 1), None);
    }
}
