//! [`CollectiveError`]: everything a communicator refuses or reports, each naming what is
//! wrong. After any of them the communicator, its devices, streams and allocators stay usable.

use braid_stream_core::collective::{BlocksError, CollectiveOp, InPlace, Signature};
use braid_stream_core::hal::HalError;
use braid_stream_core::{DType, DeviceId, DeviceSlice, SizeOverflow, WrongDevice};

/// What a communicator can refuse or report.
#[derive(Clone, PartialEq, Debug, thiserror::Error)]
pub enum CollectiveError {
    /// A communicator over no device.
    #[error("a communicator needs at least one device, the list is empty")]
    NoDevices,
    /// The same device appears twice in the list given to [`crate::Communicator::init_all`].
    #[error("{device} is given twice (positions {first} and {second}): a communicator has one rank per device")]
    DuplicateDevice {
        /// The device.
        device: DeviceId,
        /// Its first position in the list.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// A rank that a communicator of `ranks` ranks does not have.
    #[error("rank {rank} is out of range for a communicator of {ranks} rank(s)")]
    RankOutOfRange {
        /// The rank asked for.
        rank: u32,
        /// Ranks of the communicator.
        ranks: u32,
    },
    /// The backend refused to join with the root info given: bytes that are not a root info,
    /// or one whose communicator does not take this rank (the backend's reason says which).
    #[error("the root info given to rank {rank} is not one ({source})")]
    BadRootInfo {
        /// The rank that tried to join.
        rank: u32,
        /// What the backend said.
        source: HalError,
    },
    /// A collective enqueued on a stream of another device than the rank's (`expected`).
    #[error(transparent)]
    WrongDevice(#[from] Box<WrongDevice>),
    /// A buffer whose length is not a whole number of elements of the data type.
    #[error("{op}: the {buffer} buffer holds {len} bytes, not a whole number of {dtype} elements ({} bytes each)", .dtype.size())]
    PartialElement {
        /// The operation.
        op: CollectiveOp,
        /// Which buffer (`send`, `recv`, `buffer`).
        buffer: &'static str,
        /// Its length in bytes.
        len: u64,
        /// The data type.
        dtype: DType,
    },
    /// A buffer of the wrong size for the operation's element count and the ranks.
    #[error("{op} of {count} × {dtype} over {ranks} rank(s): the {buffer} buffer must hold {expected} bytes, it holds {found}")]
    BufferSize {
        /// The operation.
        op: CollectiveOp,
        /// Which buffer (`send`, `recv`).
        buffer: &'static str,
        /// The call's element count (HCCL's meaning).
        count: u64,
        /// The data type.
        dtype: DType,
        /// Ranks of the communicator.
        ranks: u32,
        /// Bytes the buffer must hold.
        expected: u64,
        /// Bytes it holds.
        found: u64,
    },
    /// A buffer whose size as the operation needs it does not fit in 64 bits.
    #[error(transparent)]
    SizeOverflow(#[from] SizeOverflow),
    /// A buffer whose elements do not split into one equal block per rank.
    #[error("{op}: the {buffer} buffer's {elements} elements do not split into {ranks} equal blocks, one per rank")]
    UnevenBlocks {
        /// The operation.
        op: CollectiveOp,
        /// Which buffer.
        buffer: &'static str,
        /// Its elements.
        elements: u64,
        /// Ranks of the communicator.
        ranks: u32,
    },
    /// A send and a receive buffer that overlap without being apart or exactly in place:
    /// HCCL and NCCL leave the result undefined, so it is refused on every backend before
    /// anything is enqueued.
    #[error("{op} of rank {rank}: the send buffer {send} and the receive buffer {recv} overlap, which HCCL and NCCL leave undefined: pass buffers that do not overlap, or {in_place}")]
    OverlappingBuffers {
        /// The operation.
        op: CollectiveOp,
        /// The calling rank.
        rank: u32,
        /// The bytes the call reads.
        send: DeviceSlice,
        /// The bytes the call writes.
        recv: DeviceSlice,
        /// What in place is for this call.
        in_place: InPlace,
    },
    /// A user's [`crate::MismatchCheck`] admitted a call without running its launch.
    #[error("{op} of rank {rank} was admitted by the mismatch check but never enqueued: the check must run the launch it is given")]
    NotLaunched {
        /// The operation.
        op: CollectiveOp,
        /// The rank.
        rank: u32,
    },
    /// A collective of no element: refused on every backend alike.
    #[error("{op} of zero elements: collectives need at least one element")]
    ZeroCount {
        /// The operation.
        op: CollectiveOp,
    },
    /// A broadcast root the communicator does not have.
    #[error("broadcast root {root} is out of range for a communicator of {ranks} rank(s)")]
    RootOutOfRange {
        /// The root asked for.
        root: u32,
        /// Ranks of the communicator.
        ranks: u32,
    },
    /// A send or receive peer the communicator does not have, or the rank itself.
    #[error("{op} of rank {rank}: peer {peer} is not another rank of this communicator of {ranks} rank(s)")]
    BadPeer {
        /// The operation.
        op: CollectiveOp,
        /// The calling rank.
        rank: u32,
        /// The peer asked for.
        peer: u32,
        /// Ranks of the communicator.
        ranks: u32,
    },
    /// A rank's collective does not match the call other ranks issued at the same place in
    /// the communicator's sequence (on hardware both would hang): not enqueued.
    #[error("rank {rank}'s collective #{call} is {found}, but rank {expected_rank} issued {expected} there: {difference}")]
    Mismatch {
        /// The rank whose call is refused.
        rank: u32,
        /// Index of the call in the rank's sequence of collectives (from 0; sends and
        /// receives are counted per pair of ranks instead).
        call: u64,
        /// The rank that issued the call first.
        expected_rank: u32,
        /// What that rank issued.
        expected: Signature,
        /// What this rank issued.
        found: Signature,
        /// How they differ.
        difference: String,
    },
    /// A send or receive that does not match its peer's counterpart at the same place in
    /// the pair's sequence: not enqueued.
    #[error("rank {rank}'s {found} is transfer #{call} from rank {sender} to rank {receiver}, but rank {peer} posted {expected} there: {difference}")]
    PeerMismatch {
        /// The rank whose call is refused.
        rank: u32,
        /// The peer that posted first.
        peer: u32,
        /// The sending rank of the pair.
        sender: u32,
        /// The receiving rank of the pair.
        receiver: u32,
        /// Index of the transfer among the pair's transfers from `sender` to `receiver`.
        call: u64,
        /// What the peer posted.
        expected: Signature,
        /// What this rank posted.
        found: Signature,
        /// How they differ.
        difference: String,
    },
    /// The front layer refused or failed the submission (a buffer that is not live memory of
    /// the stream's device, a capture rule, ...).
    #[error(transparent)]
    Stream(#[from] braid_stream_core::StreamError),
    /// The backend failed a communicator call.
    #[error("{call}: {source}")]
    Backend {
        /// The call (`init_all`, `root_info`, `init_root_info`).
        call: &'static str,
        /// What the backend said.
        source: HalError,
    },
    /// Per-rank counts and displacements of a variable-count collective that do not fit
    /// the communicator: not one entry per rank, a block whose end overflows, or receive
    /// blocks that overlap.
    #[error("{op} of rank {rank}: the {buffer} counts and displacements are refused: {source}")]
    BadBlocks {
        /// The operation.
        op: CollectiveOp,
        /// The calling rank.
        rank: u32,
        /// Which buffer's blocks (`send`, `recv`).
        buffer: &'static str,
        /// What is wrong with them.
        source: BlocksError,
    },
    /// A block of a variable-count collective that ends past its buffer.
    #[error("{op} of rank {rank}: rank {block}'s {buffer} block ends at byte {end}, past the {len}-byte {buffer} buffer; pass a larger buffer or smaller counts or displacements")]
    BlockOutOfBuffer {
        /// The operation.
        op: CollectiveOp,
        /// The calling rank.
        rank: u32,
        /// Which buffer (`send`, `recv`).
        buffer: &'static str,
        /// The rank whose block it is.
        block: u32,
        /// Where the block ends, in bytes from the buffer's start.
        end: u64,
        /// The buffer's length in bytes.
        len: u64,
    },
    /// A collective issued directly on a rank that has a group open
    /// ([`crate::Communicator::group`]): not enqueued.
    #[error("{op} of rank {rank} was issued while a group is open on this rank: add it to the group (Group::send / Group::recv) or end the group first (Group::end)")]
    GroupOpen {
        /// The operation refused.
        op: CollectiveOp,
        /// The rank.
        rank: u32,
    },
    /// A second group started on a rank whose group is still open: groups do not nest.
    #[error("rank {rank} already has a group open: end it (Group::end) before starting another")]
    GroupAlreadyOpen {
        /// The rank.
        rank: u32,
    },
    /// The rank's last group was dropped without [`crate::Group::end`]: none of its calls was
    /// enqueued, and neither was the call that reports it (issue that one again).
    #[error("rank {rank}'s group of {calls} call(s) was dropped without Group::end, so none of them was enqueued: end every group with Group::end (this call was not enqueued either: issue it again)")]
    GroupDropped {
        /// The rank.
        rank: u32,
        /// The calls the dropped group held.
        calls: usize,
    },
    /// A batch of sends and receives, or a group, with nothing in it.
    #[error("rank {rank}'s {what} holds no send or receive: it needs at least one")]
    EmptyBatch {
        /// The rank.
        rank: u32,
        /// `batch` or `group`.
        what: &'static str,
    },
    /// A sub-communicator ([`crate::Communicator::split`]) of no rank.
    #[error("sub-communicator {id} lists no rank: it needs at least one")]
    EmptySubComm {
        /// The sub-communicator's id.
        id: u64,
    },
    /// A rank listed twice for a sub-communicator.
    #[error("rank {rank} is listed twice for sub-communicator {id}")]
    DuplicateRank {
        /// The sub-communicator's id.
        id: u64,
        /// The rank.
        rank: u32,
    },
    /// A rank asked for a sub-communicator whose list does not hold it: only members call
    /// [`crate::Communicator::split`].
    #[error("rank {rank} is not a member of sub-communicator {id} (ranks {ranks:?})")]
    NotAMember {
        /// The sub-communicator's id.
        id: u64,
        /// The calling rank.
        rank: u32,
        /// The list it passed.
        ranks: Vec<u32>,
    },
    /// A member passed another list than the member that made the sub-communicator first.
    #[error("rank {rank} makes sub-communicator {id} of ranks {ranks:?}, but it was made of ranks {first:?}")]
    SubCommMismatch {
        /// The sub-communicator's id.
        id: u64,
        /// The calling rank.
        rank: u32,
        /// The list it passed.
        ranks: Vec<u32>,
        /// The list the first member passed.
        first: Vec<u32>,
    },
    /// A collective of the communicator failed after its call returned
    /// ([`crate::Communicator::async_error`], HCCL's `HcclGetCommAsyncError`): it timed out or
    /// could never complete (a rank that never issued its part), or failed on the device.
    #[error("rank {rank}'s communicator has an asynchronous error: {source}")]
    Async {
        /// The rank asked.
        rank: u32,
        /// What the backend reported (on the simulator the wait that could not complete, or
        /// a part that failed on the device; on HCCL the `HcclResult`).
        source: HalError,
    },
}

/// Result of the collective layer.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;
