//! The simulator's transport between processes, standing in for HCCL's: what a communicator
//! built from a root info (`HcclGetRootInfo` / `HcclCommInitRootInfo`) uses to run a
//! collective's data across processes.
//!
//! [`RemoteGroup::root_info`] (rank 0's process) binds a listener on `127.0.0.1` and encodes
//! its address, a fresh communicator id and a random secret into a 4,108-byte [`RootInfo`].
//! The user carries those bytes to the other processes (for example with `braid_collective`'s
//! `TcpRootInfoTransport`); every rank then calls [`RemoteGroup::join`], which returns once
//! all ranks have joined. [`RemoteGroup::exchange`] is a blocking all-gather of byte blobs: the
//! other ranks send theirs to rank 0, which answers each with every rank's blob in rank order.
//!
//! The join is a rendezvous that bad peers cannot break: rank 0 reads the connections that
//! have not sent their join request side by side (each given a second, at most 64 held, the
//! oldest closed for a newer one), refuses a request that does not fit to that peer alone
//! (no secret, another rank count, a rank out of range or taken), forgets a rank whose
//! connection closed before everyone was in, and, once everyone is, has every rank confirm
//! before it answers all of them with one outcome. So a join ends the same way on every rank,
//! except when a connection breaks in that last answer (the first exchange then fails).
//!
//! Sockets are the standard library's ones (the engine is synchronous; rank 0 polls its
//! listener and the connections not yet admitted), with every wait bounded by the group's
//! timeout; `Duration::MAX` waits without end. Failures are HCCL's codes as [`HalError::Native`]
//! (`HCCL_E_TIMEOUT`, `HCCL_E_TCP_TRANSFER`, ...) and bad parameters
//! [`HalError::InvalidArgument`]; wire format in `remote::wire`.

mod wire;

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::Duration;

use braid_stream_core::collective::RootInfo;
use braid_stream_core::deadline::Deadline;
use braid_stream_core::hal::HalError;

use wire::{Failure, Hccl, Join, RootInfoContent, Secret, JOIN_BYTES};

/// Pause between two connection attempts while rank 0 is not listening.
const POLL: Duration = Duration::from_millis(5);
/// Pause of rank 0's admission when nothing arrived.
const IDLE_PAUSE: Duration = Duration::from_millis(1);
/// How long rank 0 gives a connection to send its join request before dropping it.
const JOIN_REQUEST_WAIT: Duration = Duration::from_secs(1);
/// The most connections rank 0 holds before their join request is in; a newer one closes the
/// oldest, so that a flood of silent connections cannot keep the real ranks out.
const MAX_PENDING: usize = 64;
/// The shortest wait set on a socket (the standard library refuses zero).
const MIN_SOCKET_WAIT: Duration = Duration::from_millis(1);

/// Listeners of root infos created in this process whose rank 0 has not joined yet, with
/// what their root info holds.
static WAITING_FOR_RANK_0: Mutex<Vec<(RootInfoContent, TcpListener)>> = Mutex::new(Vec::new());

/// One rank's membership in a communicator spanning processes: the connections over which
/// [`exchange`](Self::exchange) runs.
#[derive(Debug)]
pub struct RemoteGroup {
    id: u64,
    ranks: u32,
    rank: u32,
    timeout: Duration,
    links: Mutex<Links>,
}

#[derive(Debug)]
struct Links {
    /// On rank 0: the connection to rank `i + 1` at `i`. On the others: the one to rank 0.
    streams: Vec<TcpStream>,
    /// Why the group can no longer exchange (a connection failed mid-frame).
    broken: Option<Failure>,
}

impl RemoteGroup {
    /// A fresh root info for a communicator whose rank 0 is in this process
    /// (`HcclGetRootInfo`): binds a listener on `127.0.0.1` that waits for rank 0's
    /// [`join`](Self::join).
    pub fn root_info() -> Result<RootInfo, HalError> {
        let failed = |e: io::Error| {
            Hccl::TcpConnect.error(format!("binding rank 0's listener on 127.0.0.1: {e}"))
        };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(failed)?;
        let addr = listener.local_addr().map_err(failed)?;
        let mut random = [0u8; 24];
        getrandom::fill(&mut random).map_err(|e| {
            Hccl::Internal.error(format!("drawing a root info's id and secret: {e}"))
        })?;
        let content = RootInfoContent {
            id: u64::from_le_bytes(random[..8].try_into().expect("8 bytes")),
            addr,
            secret: Secret(random[8..].try_into().expect("16 bytes")),
        };
        lock(&WAITING_FOR_RANK_0).push((content, listener));
        let id = content.id;
        tracing::debug!(id = format_args!("{id:016x}"), %addr, "simulated root info created");
        Ok(wire::encode_root_info(content))
    }

    /// Joins the communicator of `ranks` ranks that `info` describes as `rank`
    /// (`HcclCommInitRootInfo`) and returns once every rank has joined; no wait on another
    /// rank, here or in [`exchange`](Self::exchange), lasts longer than `timeout`
    /// (`Duration::MAX` waits without end).
    ///
    /// Rank 0 must join in the process that created `info`. A root info that is not one, a
    /// rank out of range, a rank count that differs from rank 0's or a rank that already
    /// joined is an invalid argument to that rank alone; ranks that do not arrive in time, or
    /// leave before the group forms, an `HCCL_E_TIMEOUT` naming them on every rank. Connections
    /// that send nothing, or anything but a join request, are dropped without effect. After a
    /// failure the root info can be joined again.
    pub fn join(
        info: &RootInfo,
        ranks: u32,
        rank: u32,
        timeout: Duration,
    ) -> Result<RemoteGroup, HalError> {
        let content = wire::decode_root_info(info)?;
        if rank >= ranks {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} is out of range for a communicator of {ranks} rank(s)"
            )));
        }
        if timeout.is_zero() {
            return Err(HalError::InvalidArgument(
                "a communicator's timeout must be above zero".to_owned(),
            ));
        }
        let streams = if rank == 0 {
            host(content, ranks, timeout)?
        } else {
            let join = Join {
                id: content.id,
                secret: content.secret,
                ranks,
                rank,
            };
            vec![connect(content.addr, join, timeout).map_err(Failure::into_error)?]
        };
        Ok(RemoteGroup {
            id: content.id,
            ranks,
            rank,
            timeout,
            links: Mutex::new(Links {
                streams,
                broken: None,
            }),
        })
    }

    /// This rank's number.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// How many ranks the communicator has.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The longest any wait on another rank lasts (given to [`join`](Self::join)).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The communicator's id (from its root info), the same on every rank.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A blocking all-gather: sends `mine` and returns every rank's blob in rank order, once
    /// every rank has called `exchange` with the same `call` (a number the caller counts up).
    ///
    /// Ranks at different calls get an invalid argument naming both calls, on every rank, and
    /// the group stays usable. A rank that leaves or is later than the group's timeout fails
    /// the exchange on every rank with an HCCL error naming it; the group is broken from then
    /// on (every later exchange fails with that error).
    pub fn exchange(&self, call: u64, mine: Vec<u8>) -> Result<Vec<Vec<u8>>, HalError> {
        let mut links = lock(&self.links);
        if let Some(broken) = &links.broken {
            return Err(Failure::new(
                broken.code,
                format!(
                    "communicator {:016x} is broken: {}",
                    self.id, broken.message
                ),
            )
            .into_error());
        }
        let result = if self.rank == 0 {
            self.gather_and_answer(&mut links, call, mine)
        } else {
            self.send_and_receive(&mut links, call, mine)
        };
        result.map_err(|failure| {
            if failure.code != Hccl::Para {
                links.broken = Some(failure.clone());
            }
            failure.into_error()
        })
    }

    /// Rank 0's side of an exchange: reads every rank's part (all of them, even after a
    /// failure, so that the others get an answer), then answers each rank.
    fn gather_and_answer(
        &self,
        links: &mut Links,
        call: u64,
        mine: Vec<u8>,
    ) -> Result<Vec<Vec<u8>>, Failure> {
        let doing = format!("exchanging call {call}");
        let mut parts = vec![mine];
        let mut failure: Option<Failure> = None;
        let mut lost = vec![false; links.streams.len()];
        for (i, stream) in links.streams.iter_mut().enumerate() {
            let peer = format!("rank {}", i + 1);
            match wire::read_part(stream, &peer, &doing) {
                Ok((theirs, part)) if theirs == call => parts.push(part),
                Ok((theirs, _)) => {
                    parts.push(Vec::new());
                    failure.get_or_insert_with(|| {
                        Failure::new(
                            Hccl::Para,
                            format!(
                                "ranks out of step: rank 0 is at call {call}, {peer} at call \
                                 {theirs} of communicator {:016x}",
                                self.id
                            ),
                        )
                    });
                }
                Err(f) => {
                    lost[i] = true;
                    parts.push(Vec::new());
                    // A lost rank outranks a rank out of step: the group is broken.
                    if failure.as_ref().is_none_or(|f| f.code == Hccl::Para) {
                        failure = Some(f);
                    }
                }
            }
        }
        for (i, stream) in links.streams.iter_mut().enumerate() {
            if lost[i] {
                continue;
            }
            let sent = wire::write_status(stream, failure.as_ref()).and_then(|()| match failure {
                None => wire::write_gathered(stream, &parts),
                Some(_) => Ok(()),
            });
            if let Err(e) = sent {
                let peer = format!("rank {}", i + 1);
                if failure.as_ref().is_none_or(|f| f.code == Hccl::Para) {
                    failure = Some(Failure::io(&peer, &doing, &e));
                }
            }
        }
        match failure {
            None => Ok(parts),
            Some(f) => Err(f),
        }
    }

    /// Another rank's side of an exchange.
    fn send_and_receive(
        &self,
        links: &mut Links,
        call: u64,
        mine: Vec<u8>,
    ) -> Result<Vec<Vec<u8>>, Failure> {
        let doing = format!("exchanging call {call}");
        let stream = &mut links.streams[0];
        wire::write_part(stream, call, &mine).map_err(|e| Failure::io("rank 0", &doing, &e))?;
        wire::read_status(stream, &doing)?;
        wire::read_gathered(stream, self.ranks, &doing)
    }
}

/// Rank 0's join: takes the listener of the communicator `content` describes and admits
/// ranks `1..ranks`.
fn host(
    content: RootInfoContent,
    ranks: u32,
    timeout: Duration,
) -> Result<Vec<TcpStream>, HalError> {
    let id = content.id;
    let listener = {
        let mut waiting = lock(&WAITING_FOR_RANK_0);
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
    if admitted.is_err() {
        // The root info stays joinable: the ranks may try again.
        lock(&WAITING_FOR_RANK_0).push((content, listener));
    }
    admitted.map_err(Failure::into_error)
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
    let refusal = if request.id != id {
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
    } else if joined[rank as usize - 1]
        .as_ref()
        .is_some_and(|held| !has_left(held))
    {
        Some(format!("rank {rank} already joined communicator {id:016x}"))
    } else {
        None
    };
    match refusal {
        Some(message) => answer(&mut stream, Some(&Failure::new(Hccl::Para, message))),
        None => joined[rank as usize - 1] = Some(stream),
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
fn connect(addr: SocketAddr, join: Join, timeout: Duration) -> Result<TcpStream, Failure> {
    let deadline = Deadline::after(timeout);
    let (id, rank) = (join.id, join.rank);
    let doing = "joining";
    let mut stream = loop {
        let left = deadline.left();
        if left.is_zero() {
            return Err(Failure::new(
                Hccl::Timeout,
                format!("rank {rank} could not reach rank 0 at {addr} within {timeout:?}"),
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    const WAIT: Duration = Duration::from_secs(5);

    /// Joins `info` as every rank of `1..ranks` on its own thread and as rank 0 here.
    fn join_all(info: &RootInfo, ranks: u32) -> Vec<RemoteGroup> {
        let others: Vec<_> = (1..ranks)
            .map(|rank| {
                let info = info.clone();
                thread::spawn(move || RemoteGroup::join(&info, ranks, rank, WAIT))
            })
            .collect();
        let mut groups = vec![RemoteGroup::join(info, ranks, 0, WAIT).unwrap()];
        groups.extend(others.into_iter().map(|t| t.join().unwrap().unwrap()));
        groups
    }

    /// Runs `exchange(call, part(rank))` on every group at once.
    fn exchange_all(
        groups: &[RemoteGroup],
        call: u64,
        part: impl Fn(u32) -> Vec<u8> + Sync,
    ) -> Vec<Result<Vec<Vec<u8>>, HalError>> {
        thread::scope(|scope| {
            let running: Vec<_> = groups
                .iter()
                .map(|g| scope.spawn(|| g.exchange(call, part(g.rank()))))
                .collect();
            running.into_iter().map(|t| t.join().unwrap()).collect()
        })
    }

    fn part_of(rank: u32) -> Vec<u8> {
        vec![rank as u8; rank as usize * 3]
    }

    #[test]
    fn every_rank_gets_every_blob_in_rank_order() {
        let info = RemoteGroup::root_info().unwrap();
        let groups = join_all(&info, 4);
        for (rank, g) in groups.iter().enumerate() {
            assert_eq!(
                (g.rank(), g.ranks(), g.id()),
                (rank as u32, 4, groups[0].id())
            );
        }
        let expected: Vec<Vec<u8>> = (0..4).map(part_of).collect();
        for call in 0..3 {
            for gathered in exchange_all(&groups, call, part_of) {
                assert_eq!(gathered.unwrap(), expected);
            }
        }
    }

    #[test]
    fn a_group_of_one_exchanges_with_itself() {
        let info = RemoteGroup::root_info().unwrap();
        let group = RemoteGroup::join(&info, 1, 0, WAIT).unwrap();
        assert_eq!(group.timeout(), WAIT);
        assert_eq!(group.exchange(0, vec![1, 2]).unwrap(), vec![vec![1, 2]]);
    }

    #[test]
    fn each_root_info_names_a_distinct_communicator() {
        let a = wire::decode_root_info(&RemoteGroup::root_info().unwrap()).unwrap();
        let b = wire::decode_root_info(&RemoteGroup::root_info().unwrap()).unwrap();
        assert_ne!(a.id, b.id);
        assert_ne!(a.addr, b.addr);
        assert!(a.addr.ip().is_loopback());
    }

    fn invalid(result: Result<RemoteGroup, HalError>) -> String {
        match result {
            Err(HalError::InvalidArgument(why)) => why,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn bad_parameters_are_refused_before_any_connection() {
        let info = RemoteGroup::root_info().unwrap();
        let not_one = RootInfo::from_bytes(&[0u8; 4108]).unwrap();
        assert!(invalid(RemoteGroup::join(&not_one, 2, 1, WAIT)).contains("not a root info"));
        assert!(invalid(RemoteGroup::join(&info, 2, 2, WAIT)).contains("rank 2 is out of range"));
        assert!(invalid(RemoteGroup::join(&info, 2, 0, Duration::ZERO)).contains("timeout"));
        // None of this used up the root info.
        join_all(&info, 2);
    }

    #[test]
    fn rank_0_must_join_where_the_root_info_was_made_and_only_once() {
        let info = RemoteGroup::root_info().unwrap();
        let group = RemoteGroup::join(&info, 1, 0, WAIT).unwrap();
        let why = invalid(RemoteGroup::join(&info, 1, 0, WAIT));
        assert!(
            why.contains("must join in the process that created"),
            "{why}"
        );
        drop(group);
    }

    #[test]
    fn a_rank_told_another_rank_count_is_refused_and_may_join_again() {
        let info = RemoteGroup::root_info().unwrap();
        let host = {
            let info = info.clone();
            thread::spawn(move || RemoteGroup::join(&info, 2, 0, WAIT))
        };
        let why = invalid(RemoteGroup::join(&info, 3, 1, WAIT));
        assert!(
            why.contains("told the communicator has 3 rank(s), rank 0 that it has 2"),
            "{why}"
        );
        let rank_1 = RemoteGroup::join(&info, 2, 1, WAIT).unwrap();
        let rank_0 = host.join().unwrap().unwrap();
        let groups = [rank_0, rank_1];
        for gathered in exchange_all(&groups, 0, part_of) {
            assert_eq!(gathered.unwrap(), vec![part_of(0), part_of(1)]);
        }
    }

    #[test]
    fn a_rank_that_already_joined_is_refused() {
        let info = RemoteGroup::root_info().unwrap();
        let twins: Vec<_> = (0..2)
            .map(|_| {
                let info = info.clone();
                thread::spawn(move || RemoteGroup::join(&info, 3, 1, WAIT))
            })
            .collect();
        // Both rank 1s are queued on rank 0's listener before rank 2 and rank 0 come.
        thread::sleep(Duration::from_millis(200));
        let rank_2 = {
            let info = info.clone();
            thread::spawn(move || RemoteGroup::join(&info, 3, 2, WAIT))
        };
        let rank_0 = RemoteGroup::join(&info, 3, 0, WAIT).unwrap();
        let (mut admitted, mut refused) = (Vec::new(), Vec::new());
        for twin in twins {
            match twin.join().unwrap() {
                Ok(group) => admitted.push(group),
                Err(err) => refused.push(err.to_string()),
            }
        }
        assert_eq!((admitted.len(), refused.len()), (1, 1), "{refused:?}");
        assert!(refused[0].contains("rank 1 already joined"), "{refused:?}");
        let groups = [rank_0, admitted.remove(0), rank_2.join().unwrap().unwrap()];
        for gathered in exchange_all(&groups, 0, part_of) {
            assert_eq!(gathered.unwrap().len(), 3);
        }
    }

    fn timeout_message(result: Result<impl std::fmt::Debug, HalError>) -> String {
        match result {
            Err(HalError::Native {
                code: 9,
                name: "HCCL_E_TIMEOUT",
                message,
            }) => message,
            other => panic!("expected HCCL_E_TIMEOUT, got {other:?}"),
        }
    }

    #[test]
    fn ranks_that_do_not_join_in_time_are_named_and_the_root_info_stays_joinable() {
        let info = RemoteGroup::root_info().unwrap();
        let short = Duration::from_millis(200);
        let rank_1 = {
            let info = info.clone();
            thread::spawn(move || RemoteGroup::join(&info, 3, 1, WAIT))
        };
        let message = timeout_message(RemoteGroup::join(&info, 3, 0, short));
        assert!(message.contains("rank(s) 2 of communicator"), "{message}");
        // The rank that had joined hears why rather than waiting on.
        let message = timeout_message(rank_1.join().unwrap());
        assert!(message.contains("rank(s) 2"), "{message}");
        join_all(&info, 3);
    }

    #[test]
    fn a_rank_times_out_when_rank_0_never_joins() {
        let info = RemoteGroup::root_info().unwrap();
        let message = timeout_message(RemoteGroup::join(&info, 2, 1, Duration::from_millis(100)));
        assert!(
            message.contains("rank 0 did not answer in time"),
            "{message}"
        );
    }

    #[test]
    fn a_rank_times_out_when_nobody_listens() {
        let addr = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let info = wire::encode_root_info(RootInfoContent {
            id: 1,
            addr,
            secret: Secret([1; 16]),
        });
        let message = timeout_message(RemoteGroup::join(&info, 2, 1, Duration::from_millis(100)));
        assert!(
            message.contains(&format!("could not reach rank 0 at {addr}")),
            "{message}"
        );
    }

    #[test]
    fn ranks_out_of_step_fail_on_every_rank_and_the_group_goes_on() {
        let info = RemoteGroup::root_info().unwrap();
        let groups = join_all(&info, 3);
        let results = thread::scope(|scope| {
            let running: Vec<_> = groups
                .iter()
                .map(|g| {
                    let call = if g.rank() == 2 { 8 } else { 7 };
                    scope.spawn(move || g.exchange(call, vec![]))
                })
                .collect();
            running
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        });
        for result in results {
            match result {
                Err(HalError::InvalidArgument(why)) => {
                    assert!(
                        why.contains("rank 0 is at call 7, rank 2 at call 8"),
                        "{why}"
                    )
                }
                other => panic!("expected an invalid argument, got {other:?}"),
            }
        }
        for gathered in exchange_all(&groups, 9, part_of) {
            assert_eq!(gathered.unwrap(), vec![part_of(0), part_of(1), part_of(2)]);
        }
    }

    #[test]
    fn a_rank_that_leaves_breaks_the_exchange_on_every_rank() {
        let info = RemoteGroup::root_info().unwrap();
        let mut groups = join_all(&info, 3);
        drop(groups.pop());
        for result in exchange_all(&groups, 0, part_of) {
            match result {
                Err(HalError::Native {
                    code: 13, message, ..
                }) => {
                    assert!(
                        message.contains("rank 2 closed the connection"),
                        "{message}"
                    )
                }
                other => panic!("expected HCCL_E_TCP_TRANSFER, got {other:?}"),
            }
        }
        // Broken from then on, saying so.
        let err = groups[0].exchange(1, vec![]).unwrap_err();
        assert!(err.to_string().contains("is broken"), "{err}");
    }
}
