//! The order a rank issues a batch of sends and receives in (`HcclBatchSendRecv`, or a group
//! of them): one order every rank agrees on without talking, so that backends which run a
//! stream's parts one after the other (the simulator) cannot deadlock on a batch.
//!
//! Each transfer is keyed by its pair of ranks (lower rank first) and its direction (from the
//! lower rank first); both ends of a transfer compute the same key. Sorting every rank's batch
//! by it means the unfinished transfer with the smallest key is at the front of both its
//! ranks' work, so it can always run: a ring, a full exchange, any mix completes. Transfers
//! of one pair and direction keep their relative order, which is how they pair (the `k`-th
//! send from `a` to `b` with the `k`-th receive of `b` from `a`).

use super::{CollectiveCall, CollectiveOp};

/// Sorts rank `rank`'s sends and receives `calls` into the order every rank agrees on (a
/// stable sort: transfers of one pair and direction keep their order). Other operations sort
/// last, in their order.
pub fn batch_order(rank: u32, calls: &mut [CollectiveCall]) {
    calls.sort_by_key(|call| transfer_key(rank, call.op));
}

/// (lower rank, higher rank, 0 when the lower rank sends) of a send or receive.
fn transfer_key(rank: u32, op: CollectiveOp) -> (u32, u32, u8) {
    let (from, to) = match op {
        CollectiveOp::Send { peer } => (rank, peer),
        CollectiveOp::Recv { peer } => (peer, rank),
        _ => return (u32::MAX, u32::MAX, u8::MAX),
    };
    (from.min(to), from.max(to), u8::from(from > to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::types::DevicePtr;

    fn call(op: CollectiveOp, count: u64) -> CollectiveCall {
        CollectiveCall {
            op,
            send: DevicePtr(0x100),
            recv: DevicePtr(0x200),
            count,
            dtype: DType::F32,
            v: None,
        }
    }

    #[test]
    fn both_ends_of_a_transfer_put_it_at_the_same_place() {
        // Rank 1 of a ring of 3: receives from 0, sends to 2, in the user's other order.
        let mut one = [
            call(CollectiveOp::Send { peer: 2 }, 1),
            call(CollectiveOp::Recv { peer: 0 }, 2),
        ];
        batch_order(1, &mut one);
        assert_eq!(one[0].op, CollectiveOp::Recv { peer: 0 });
        // Rank 0 sends to 1 and receives from 2: the (0, 1) transfer first, as on rank 1.
        let mut zero = [
            call(CollectiveOp::Recv { peer: 2 }, 3),
            call(CollectiveOp::Send { peer: 1 }, 2),
        ];
        batch_order(0, &mut zero);
        assert_eq!(zero[0].op, CollectiveOp::Send { peer: 1 });
        // Two ranks exchanging: the lower rank's send goes first on both.
        let mut a = [
            call(CollectiveOp::Recv { peer: 1 }, 1),
            call(CollectiveOp::Send { peer: 1 }, 1),
        ];
        let mut b = [
            call(CollectiveOp::Send { peer: 0 }, 1),
            call(CollectiveOp::Recv { peer: 0 }, 1),
        ];
        batch_order(0, &mut a);
        batch_order(1, &mut b);
        assert_eq!(a[0].op, CollectiveOp::Send { peer: 1 });
        assert_eq!(b[0].op, CollectiveOp::Recv { peer: 0 });
    }

    #[test]
    fn transfers_of_one_pair_and_direction_keep_their_order() {
        let mut calls = [
            call(CollectiveOp::Send { peer: 3 }, 1),
            call(CollectiveOp::Send { peer: 1 }, 7),
            call(CollectiveOp::Send { peer: 3 }, 2),
            call(CollectiveOp::Barrier, 0),
        ];
        batch_order(0, &mut calls);
        let counts: Vec<u64> = calls.iter().map(|c| c.count).collect();
        assert_eq!(counts, [7, 1, 2, 0]);
    }
}
