//! The join: the rendezvous of a [`RemoteGroup`](super::RemoteGroup)'s ranks. Rank 0
//! ([`host`]) admits the other ranks' join requests side by side and answers all of them with
//! one outcome; every other rank ([`connect`]) connects to it, asks to join and waits for
//! that outcome (see the [parent module](super) for the guarantees).

use super::wire::{self, Failure, Hccl, Join, RootInfoContent, JOIN_BYTES};
use super::WAITING_FOR_RANK_0;
use braid_stream_core::deadline::Deadline;
use braid_stream_core::hal::HalError;
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::Duration;

/// Pause between two connection attempts while rank 0 is not listening.
const POLL: Duration = Duration::from_millis(5);
/// Pause of rank 0's admission when nothing arrived.
const IDLE_PAUSE: Duration = Duration::from_millis(1);
/// Pause of the answers to late joins when nothing arrived (and the longest a group's drop
/// waits for them to stop).
const LATE_PAUSE: Duration = Duration::from_millis(10);
/// How long rank 0 gives a connection to send its join request before dropping it.
const JOIN_REQUEST_WAIT: Duration = Duration::from_secs(1);
/// The most connections rank 0 holds before their join request is in; a newer one closes the
/// oldest, so that a flood of silent connections cannot keep the real ranks out.
const MAX_PENDING: usize = 64;
/// The shortest wait set on a socket (the standard library refuses zero).
const MIN_SOCKET_WAIT: Duration = Duration::from_millis(1);

/// Rank 0's join: takes the listener of the communicator `content` describes and admits
/// ranks `1..ranks`. Returns their connections and the listener, which the formed group
/// keeps to answer late joins ([`LateJoins`]).
pub(super) fn host(
    content: RootInfoContent,
    ranks: u32,
    timeout: Duration,
) -> Result<(Vec<TcpStream>, TcpListener), HalError> {
    let id = content.id;
    let listener = {
        let mut waiting = WAITING_FOR_RANK_0.lock();
        let at = waiting
            .iter()
            .position(|(made, _)| made.id == id && made.secret.matches(&content.secret));
        at.map(|at| waiting.swap_remove(at).1)
    };
    let Some(listener) = listener else {
        return Err(HalError::InvalidArgument(format!(
            "rank 0 of communicator {id:016x} must join in the process that created its root \
             info, and only once at a time"
        )));
    };
    let admitted = gather(&listener, content, ranks, timeout)
        .and_then(|streams| confirm(streams, id, timeout));
    match admitted {
        Ok(streams) => Ok((streams, listener)),
        Err(failure) => {
            // The root info stays joinable: the ranks may try again.
            WAITING_FOR_RANK_0.lock().push((content, listener));
            Err(failure.into_error())
        }
    }
}

/// Rank 0's answers, while its group lives, to joins that come after the communicator
/// formed: each is refused at once as a join during the rendezvous would be (another
/// communicator, no secret, another rank count, a rank out of range), or told that its rank
/// is taken, instead of waiting for an answer that never comes. A thread of its own polls
/// the root info's listener (connections read side by side, at most 64 held, a second each,
/// as in the rendezvous); dropping this stops it and closes the listener.
pub(super) struct LateJoins {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LateJoins {
    /// Answers the late joins of the communicator `content` describes (of `ranks` ranks) on
    /// `listener`.
    pub(super) fn start(
        listener: TcpListener,
        content: RootInfoContent,
        ranks: u32,
    ) -> Result<LateJoins, HalError> {
        listener
            .set_nonblocking(true)
            .map_err(|e| Failure::io("rank 0's listener", "polling", &e).into_error())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("braid-sim-late-joins-{:016x}", content.id))
            .spawn(move || answer_late_joins(&listener, content, ranks, &stopped))
            .map_err(|e| {
                Hccl::Internal.error(format!("starting the answers to late joins: {e}"))
            })?;
        Ok(LateJoins {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for LateJoins {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl fmt::Debug for LateJoins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LateJoins")
    }
}

/// The body of [`LateJoins`]' thread: until `stop`, refuses every join request on `listener`.
fn answer_late_joins(
    listener: &TcpListener,
    content: RootInfoContent,
    ranks: u32,
    stop: &AtomicBool,
) {
    let mut pending: VecDeque<Pending> = VecDeque::new();
    while !stop.load(Ordering::Relaxed) {
        let accepted =
            match accept_pending(listener, &mut pending, Deadline::after(JOIN_REQUEST_WAIT)) {
                Ok(accepted) => accepted,
                Err(failure) => {
                    tracing::debug!(message = failure.message, "late joins: the listener failed");
                    false
                }
            };
        let mut requests = Vec::new();
        let read = read_pending(&mut pending, &mut requests);
        for (mut stream, request) in requests {
            let message = refusal(&request, content, ranks).unwrap_or_else(|| {
                format!(
                    "rank {} of communicator {:016x} is taken: the communicator formed with all \
                     {ranks} of its ranks, and each rank joins once",
                    request.rank, content.id
                )
            });
            tracing::debug!(
                rank = request.rank,
                "refused a join after the communicator formed"
            );
            answer(&mut stream, Some(&Failure::new(Hccl::Para, message)));
        }
        if !accepted && !read {
            sleep(LATE_PAUSE);
        }
    }
}

/// A connection whose join request is not all in yet.
struct Pending {
    stream: TcpStream,
    frame: [u8; JOIN_BYTES],
    filled: usize,
    /// When it is dropped if the request is still not in.
    deadline: Deadline,
}

/// Accepts join requests until ranks `1..ranks` are in or the timeout passes (the ranks that
/// joined told why not). Connections are read side by side without blocking; a request that
/// does not fit is refused to its peer alone; a rank whose connection closes before everyone
/// is in loses its place (it may join again).
fn gather(
    listener: &TcpListener,
    content: RootInfoContent,
    ranks: u32,
    timeout: Duration,
) -> Result<Vec<TcpStream>, Failure> {
    let id = content.id;
    let deadline = Deadline::after(timeout);
    let mut joined: Vec<Option<TcpStream>> = (1..ranks).map(|_| None).collect();
    let mut pending: VecDeque<Pending> = VecDeque::new();
    listener
        .set_nonblocking(true)
        .map_err(|e| Failure::io("rank 0's listener", "polling", &e))?;
    while joined.iter().any(Option::is_none) {
        if deadline.has_passed() {
            let missing: Vec<String> = (1..ranks)
                .filter(|r| joined[*r as usize - 1].is_none())
                .map(|r| r.to_string())
                .collect();
            let failure = Failure::new(
                Hccl::Timeout,
                format!(
                    "rank(s) {} of communicator {id:016x} did not join within {timeout:?}",
                    missing.join(", ")
                ),
            );
            // Ranks whose request is still coming hear the same cause as those that joined.
            let waiting = pending.iter_mut().map(|p| &mut p.stream);
            for stream in joined.iter_mut().flatten().chain(waiting) {
                answer(stream, Some(&failure));
            }
            return Err(failure);
        }
        let accepted = accept_pending(listener, &mut pending, deadline)?;
        let mut requests = Vec::new();
        let read = read_pending(&mut pending, &mut requests);
        for (stream, request) in requests {
            consider(stream, request, content, ranks, &mut joined);
        }
        for (i, slot) in joined.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(has_left) {
                tracing::debug!(rank = i + 1, "a rank left before every rank joined");
                *slot = None;
            }
        }
        if !accepted && !read {
            sleep(IDLE_PAUSE);
        }
    }
    Ok(joined.into_iter().flatten().collect())
}

/// Takes the connections waiting on `listener` (at most [`MAX_PENDING`] at a time), keeping at
/// most that many pending by closing the oldest. Whether any came.
fn accept_pending(
    listener: &TcpListener,
    pending: &mut VecDeque<Pending>,
    deadline: Deadline,
) -> Result<bool, Failure> {
    for taken in 0..MAX_PENDING {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(taken > 0),
            Err(e) if connection_gone(&e) => continue,
            Err(e) => return Err(Failure::io("rank 0's listener", "accepting", &e)),
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        if pending.len() == MAX_PENDING {
            pending.pop_front();
            tracing::debug!("closed the oldest connection without a join request for a newer one");
        }
        pending.push_back(Pending {
            stream,
            frame: [0; JOIN_BYTES],
            filled: 0,
            deadline: deadline.min(Deadline::after(JOIN_REQUEST_WAIT)),
        });
    }
    Ok(true)
}

/// Reads what the pending connections sent: moves the complete join requests to `complete`,
/// drops the connections that closed, sent something else or ran out of time. Whether any
/// bytes or closings came.
fn read_pending(pending: &mut VecDeque<Pending>, complete: &mut Vec<(TcpStream, Join)>) -> bool {
    let mut any = false;
    for mut p in std::mem::take(pending) {
        match p.stream.read(&mut p.frame[p.filled..]) {
            Ok(0) => {
                any = true;
                continue;
            }
            Ok(n) => {
                any = true;
                p.filled += n;
                if p.filled == JOIN_BYTES {
                    match wire::parse_join(&p.frame) {
                        Some(request) => complete.push((p.stream, request)),
                        None => tracing::debug!("dropped a connection that sent no join request"),
                    }
                    continue;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => continue,
        }
        if p.deadline.has_passed() {
            tracing::debug!("dropped a connection that sent no join request in time");
            continue;
        }
        pending.push_back(p);
    }
    any
}

/// Admits `request` into its rank's place, or refuses it to its peer alone.
fn consider(
    mut stream: TcpStream,
    request: Join,
    content: RootInfoContent,
    ranks: u32,
    joined: &mut [Option<TcpStream>],
) {
    let (id, rank) = (content.id, request.rank);
    let refusal = refusal(&request, content, ranks).or_else(|| {
        joined[rank as usize - 1]
            .as_ref()
            .is_some_and(|held| !has_left(held))
            .then(|| format!("rank {rank} already joined communicator {id:016x}"))
    });
    match refusal {
        Some(message) => answer(&mut stream, Some(&Failure::new(Hccl::Para, message))),
        None => joined[rank as usize - 1] = Some(stream),
    }
}

/// Why `request` does not fit the communicator `content` describes, of `ranks` ranks
/// (whatever the other ranks did): another communicator, no secret, another rank count, a
/// rank out of range.
fn refusal(request: &Join, content: RootInfoContent, ranks: u32) -> Option<String> {
    let (id, rank) = (content.id, request.rank);
    if request.id != id {
        Some(format!(
            "rank {rank} asked for communicator {:016x}, rank 0 hosts {id:016x}",
            request.id
        ))
    } else if !request.secret.matches(&content.secret) {
        Some(format!(
            "rank {rank}'s join request does not carry the secret of communicator {id:016x}: \
             it was not made from its root info"
        ))
    } else if request.ranks != ranks {
        Some(format!(
            "rank {rank} was told the communicator has {} rank(s), rank 0 that it has {ranks}",
            request.ranks
        ))
    } else if rank == 0 || rank >= ranks {
        Some(format!(
            "rank {rank} is out of range for a communicator of {ranks} rank(s)"
        ))
    } else {
        None
    }
}

/// Once every rank is in: tells each so, waits for each to confirm, then answers all of them
/// with one outcome, so that a rank that left meanwhile fails the join on every rank. The
/// connections are then ready for exchanges (blocking, the group's timeout on each wait).
fn confirm(
    mut streams: Vec<TcpStream>,
    id: u64,
    timeout: Duration,
) -> Result<Vec<TcpStream>, Failure> {
    // Half the timeout, so that the answer reaches ranks that wait the whole timeout for it.
    let deadline = Deadline::after(timeout / 2);
    let doing = format!("forming communicator {id:016x}");
    let left_early = |rank: usize, why: Failure| {
        Failure::new(
            Hccl::Timeout,
            format!(
                "rank {rank} left communicator {id:016x} before it formed: {}",
                why.message
            ),
        )
    };
    let mut failure: Option<Failure> = None;
    let mut asked = vec![false; streams.len()];
    for (i, stream) in streams.iter_mut().enumerate() {
        let peer = format!("rank {}", i + 1);
        let sent = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| wire::write_status(stream, None));
        match sent {
            Ok(()) => asked[i] = true,
            Err(e) => {
                let why = Failure::io(&peer, &doing, &e);
                failure.get_or_insert_with(|| left_early(i + 1, why));
            }
        }
    }
    // Every confirmation is read, even after a failure, so that each rank gets an answer.
    let mut confirmed = vec![false; streams.len()];
    for (i, stream) in streams.iter_mut().enumerate().filter(|(i, _)| asked[*i]) {
        let peer = format!("rank {}", i + 1);
        let heard = stream
            .set_read_timeout(Some(deadline.left().max(MIN_SOCKET_WAIT)))
            .map_err(|e| Failure::io(&peer, &doing, &e))
            .and_then(|()| wire::read_confirm(stream, &peer, &doing));
        match heard {
            Ok(()) => confirmed[i] = true,
            Err(why) => {
                failure.get_or_insert_with(|| left_early(i + 1, why));
            }
        }
    }
    for (i, stream) in streams.iter_mut().enumerate() {
        if !confirmed[i] {
            continue;
        }
        let answered = wire::write_status(stream, failure.as_ref())
            .and_then(|()| stream.set_read_timeout(Some(timeout)));
        if let Err(e) = answered {
            // Past the point of agreement: the others were told it formed, and the first
            // exchange fails on every rank.
            tracing::debug!(rank = i + 1, %e, "a rank left as its communicator formed");
        }
    }
    match failure {
        None => Ok(streams),
        Some(failure) => Err(failure),
    }
}

/// Best effort: sends a status to a peer that may have left.
fn answer(stream: &mut TcpStream, failure: Option<&Failure>) {
    let _ = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_write_timeout(Some(JOIN_REQUEST_WAIT)))
        .and_then(|()| wire::write_status(stream, failure));
}

/// Whether the peer of a (non-blocking) connection has closed it.
fn has_left(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != ErrorKind::WouldBlock,
    }
}

/// Accept errors that concern one connection, which left before it was accepted.
fn connection_gone(error: &io::Error) -> bool {
    use ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | Interrupted
    )
}

/// Another rank's join: connects to rank 0 (retrying while it is not listening), asks to
/// join, waits until rank 0 says every rank is in (or refuses), confirms and waits for the
/// outcome.
pub(super) fn connect(
    addr: SocketAddr,
    join: Join,
    timeout: Duration,
) -> Result<TcpStream, Failure> {
    let deadline = Deadline::after(timeout);
    let (id, rank) = (join.id, join.rank);
    let doing = "joining";
    let mut stream = loop {
        let left = deadline.left();
        if left.is_zero() {
            return Err(Failure::new(
                Hccl::Timeout,
                format!(
                    "rank {rank} could not reach rank 0 at {addr} within {timeout:?}: nothing \
                     listens there (rank 0 listens from the root info's creation until its \
                     group is dropped, so its process has ended or its group is gone)"
                ),
            ));
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => break stream,
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::TimedOut) => {
                sleep(POLL.min(deadline.left()));
            }
            Err(e) => {
                return Err(Failure::new(
                    Hccl::TcpConnect,
                    format!("rank {rank} connecting to rank 0 at {addr}: {e}"),
                ))
            }
        }
    };
    let io = |e: io::Error| Failure::io("rank 0", doing, &e);
    stream.set_nodelay(true).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let left = deadline.left().max(MIN_SOCKET_WAIT);
    stream.set_read_timeout(Some(left)).map_err(io)?;
    wire::write_join(&mut stream, join).map_err(io)?;
    wire::read_status(&mut stream, doing).map_err(|failure| {
        if failure.code == Hccl::Timeout && deadline.has_passed() {
            Failure::new(
                Hccl::Timeout,
                format!(
                    "rank {rank} of communicator {id:016x} gave up after {timeout:?}: rank 0 did \
                     not answer in time that every rank joined"
                ),
            )
        } else {
            failure
        }
    })?;
    wire::write_confirm(&mut stream).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    wire::read_status(&mut stream, doing)?;
    Ok(stream)
}
