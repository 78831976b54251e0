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
//! Sends and receives involve two ranks only, so they do not go through rank 0: each rank
//! also listens on `127.0.0.1` from its join on (the join's last exchange tells every rank
//! where the others listen), and [`RemoteGroup::send`] opens, once per sender and receiver, a
//! direct connection to its receiver, introduced by the communicator's id, its secret and the
//! two ranks. A send writes its part and waits for the receive's answer, its own part, so that
//! both ranks see both parts and decide alike; `remote::p2p` holds that side.
//!
//! The join is a rendezvous that bad peers cannot break: rank 0 reads the connections that
//! have not sent their join request side by side (each given a second, at most 64 held, the
//! oldest closed for a newer one), refuses a request that does not fit to that peer alone
//! (no secret, another rank count, a rank out of range or taken), forgets a rank whose
//! connection closed before everyone was in, and, once everyone is, has every rank confirm
//! before it answers all of them with one outcome. So a join ends the same way on every rank,
//! except when a connection breaks in that last answer (the first exchange then fails).
//! Rank 0 keeps its listener while its group lives and refuses a join that comes after the
//! group formed at once, saying the rank is taken.
//!
//! Sockets are the standard library's ones (the engine is synchronous; rank 0 polls its
//! listener and the connections not yet admitted), with every wait bounded by the group's
//! timeout; `Duration::MAX` waits without end. Failures are HCCL's codes as [`HalError::Native`]
//! (`HCCL_E_TIMEOUT`, `HCCL_E_TCP_TRANSFER`, ...) and bad parameters
//! [`HalError::InvalidArgument`]; the rendezvous in `remote::join`, the wire format in
//! `remote::wire`, the point-to-point connections in `remote::p2p`.

mod join;
mod p2p;
mod wire;

use braid_stream_core::sync::{GlobalMutex, Mutex};
use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::time::Duration;

use braid_stream_core::collective::RootInfo;
use braid_stream_core::hal::HalError;

use join::{connect, host, LateJoins};
use p2p::{Hello, PointToPoint};
use wire::{Failure, Hccl, Join, RootInfoContent, Secret};

/// Listeners of root infos created in this process whose rank 0 has not joined yet, with
/// what their root info holds.
static WAITING_FOR_RANK_0: GlobalMutex<Vec<(RootInfoContent, TcpListener)>> =
    GlobalMutex::new(Vec::new());

/// The number of the exchange at the end of a join that tells every rank where the others
/// listen for point-to-point connections.
const ADDRESSES: u64 = u64::MAX;

/// One rank's membership in a communicator spanning processes: the connections over which
/// [`exchange`](Self::exchange) runs.
#[derive(Debug)]
pub struct RemoteGroup {
    id: u64,
    ranks: u32,
    rank: u32,
    timeout: Duration,
    secret: Secret,
    links: Mutex<Links>,
    /// The direct connections of sends and receives.
    p2p: PointToPoint,
    /// On rank 0: the answers to joins that come after the group formed.
    _late_joins: Option<LateJoins>,
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
        WAITING_FOR_RANK_0.lock().push((content, listener));
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
    /// failure the root info can be joined again. Once the group has formed, and while rank
    /// 0's group lives, a join for any of its ranks is refused at once as taken (an invalid
    /// argument).
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
        let (streams, late_joins) = if rank == 0 {
            let (streams, listener) = host(content, ranks, timeout)?;
            (streams, Some(LateJoins::start(listener, content, ranks)?))
        } else {
            let join = Join {
                id: content.id,
                secret: content.secret,
                ranks,
                rank,
            };
            let stream = connect(content.addr, join, timeout).map_err(Failure::into_error)?;
            (vec![stream], None)
        };
        let listener = PointToPoint::listen().map_err(Failure::into_error)?;
        let addr = listener.local_addr().map_err(|e| {
            Hccl::TcpConnect.error(format!(
                "reading the point-to-point listener's address: {e}"
            ))
        })?;
        let mut group = RemoteGroup {
            id: content.id,
            ranks,
            rank,
            timeout,
            secret: content.secret,
            links: Mutex::new(Links {
                streams,
                broken: None,
            }),
            p2p: PointToPoint::new(listener, Vec::new()),
            _late_joins: late_joins,
        };
        // Every rank learns where the others listen (an exchange numbered apart from the
        // caller's, which count from 0).
        let everyone = group.exchange(ADDRESSES, addr.to_string().into_bytes())?;
        group.p2p.addrs = (everyone.iter())
            .map(|bytes| {
                std::str::from_utf8(bytes)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| {
                        Hccl::TcpTransfer
                            .error("a rank sent a garbled point-to-point address".to_owned())
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(group)
    }

    /// Sends `mine`, the `number`-th part from this rank to `peer`, over their direct
    /// connection (opened by the first send), and returns the receiver's answer: the number
    /// of its receive from this rank and its part. Blocks until `peer` receives it; no wait
    /// lasts longer than `timeout` (`HCCL_E_TIMEOUT` naming the peer; the connection is then
    /// dropped and the next send opens a new one).
    pub fn send(
        &self,
        peer: u32,
        number: u64,
        mine: &[u8],
        timeout: Duration,
    ) -> Result<(u64, Vec<u8>), HalError> {
        let hello = self.hello(self.rank, peer)?;
        self.p2p
            .send(hello, number, mine, timeout)
            .map_err(Failure::into_error)
    }

    /// Receives the `number`-th part from `peer` to this rank and answers it with `mine`:
    /// returns the sender's number for it and its part (see [`send`](Self::send)).
    pub fn receive(
        &self,
        peer: u32,
        number: u64,
        mine: &[u8],
        timeout: Duration,
    ) -> Result<(u64, Vec<u8>), HalError> {
        let hello = self.hello(peer, self.rank)?;
        self.p2p
            .receive(hello, number, mine, timeout)
            .map_err(Failure::into_error)
    }

    fn hello(&self, from: u32, to: u32) -> Result<Hello, HalError> {
        let peer = if from == self.rank { to } else { from };
        if peer >= self.ranks || peer == self.rank {
            return Err(HalError::InvalidArgument(format!(
                "peer {peer} must be another rank of the {} of communicator {:016x}",
                self.ranks, self.id
            )));
        }
        Ok(Hello {
            id: self.id,
            secret: self.secret,
            from,
            to,
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
        let mut links = self.links.lock();
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
    fn a_send_and_its_receive_trade_parts_over_the_pair_s_connection() {
        let info = RemoteGroup::root_info().unwrap();
        let groups = join_all(&info, 3);
        thread::scope(|scope| {
            let receiving = scope.spawn(|| {
                (0..2)
                    .map(|k| groups[2].receive(1, k, &[2, k as u8], WAIT).unwrap())
                    .collect::<Vec<_>>()
            });
            let sent: Vec<_> = (0..2)
                .map(|k| groups[1].send(2, k, &[1, k as u8], WAIT).unwrap())
                .collect();
            assert_eq!(sent, [(0, vec![2, 0]), (1, vec![2, 1])]);
            assert_eq!(
                receiving.join().unwrap(),
                [(0, vec![1, 0]), (1, vec![1, 1])]
            );
        });
        // Rank 0 took no part: the group's exchanges still run.
        for gathered in exchange_all(&groups, 0, part_of) {
            assert_eq!(gathered.unwrap().len(), 3);
        }
    }

    #[test]
    fn a_receive_ignores_strangers_and_times_out_naming_its_sender() {
        let info = RemoteGroup::root_info().unwrap();
        let groups = join_all(&info, 2);
        // A connection that does not carry the communicator's secret is dropped.
        let mut stranger = TcpStream::connect(groups[0].p2p.addrs[1]).unwrap();
        let hello = Hello {
            secret: Secret([0; 16]),
            ..groups[0].hello(0, 1).unwrap()
        };
        std::io::Write::write_all(&mut stranger, &p2p::encode_hello(hello)).unwrap();
        wire::write_part(&mut stranger, 0, &[9]).unwrap();
        let message = timeout_message(groups[1].receive(0, 0, &[], Duration::from_millis(200)));
        assert!(message.contains("rank 0 did not send"), "{message}");
        let err = groups[1].send(1, 0, &[], WAIT).unwrap_err();
        assert!(matches!(err, HalError::InvalidArgument(_)), "{err:?}");
        let err = groups[1].receive(2, 0, &[], WAIT).unwrap_err();
        assert!(matches!(err, HalError::InvalidArgument(_)), "{err:?}");
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

    #[test]
    fn a_join_for_a_rank_taken_in_a_formed_communicator_says_it_is_taken() {
        let info = RemoteGroup::root_info().unwrap();
        let groups = join_all(&info, 2);
        let started = std::time::Instant::now();
        let why = invalid(RemoteGroup::join(&info, 2, 1, WAIT));
        assert!(
            why.contains("rank 1") && why.contains("taken") && why.contains("formed"),
            "{why}"
        );
        assert!(started.elapsed() < WAIT, "took {:?}", started.elapsed());
        // A rank out of range hears that instead.
        let why = invalid(RemoteGroup::join(&info, 3, 2, WAIT));
        assert!(why.contains("3 rank(s), rank 0 that it has 2"), "{why}");
        // The group is untouched.
        for gathered in exchange_all(&groups, 0, part_of) {
            assert_eq!(gathered.unwrap(), vec![part_of(0), part_of(1)]);
        }
        // Once rank 0's group is gone, a late join no longer waits for an answer either.
        drop(groups);
        let message = timeout_message(RemoteGroup::join(&info, 2, 1, Duration::from_millis(300)));
        assert!(message.contains("nothing listens there"), "{message}");
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
