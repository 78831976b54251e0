//! The join of a [`RemoteGroup`] (the simulator's stand-in for HCCL's transport) against
//! peers that do not follow its protocol, over real sockets on 127.0.0.1: silent connections,
//! a flood of them, an impostor, a rank that gives up or leaves as the group forms, and a
//! timeout of `Duration::MAX`. Every rank's outcome is checked, since a rendezvous must end
//! the same on every rank. Each test is bounded in connections and in time.
//!
//! The bad peers speak the wire format documented in `remote/wire.rs` by hand.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use braid_backend_sim::RemoteGroup;
use braid_stream_core::collective::RootInfo;
use braid_stream_core::hal::HalError;

/// What the ranks that must succeed wait at most.
const WAIT: Duration = Duration::from_secs(3);

/// Joins `info` as `rank` of `ranks` on a thread of its own.
fn join(info: &RootInfo, ranks: u32, rank: u32, wait: Duration) -> JoinHandle<JoinResult> {
    let info = info.clone();
    thread::spawn(move || RemoteGroup::join(&info, ranks, rank, wait))
}

type JoinResult = Result<RemoteGroup, HalError>;

fn outcome(handle: JoinHandle<JoinResult>) -> JoinResult {
    handle.join().unwrap()
}

/// Rank 0's listener, read from the root info's documented layout.
fn listener_of(info: &RootInfo) -> SocketAddr {
    let bytes = info.as_bytes();
    assert_eq!(bytes[20], 4, "the simulator listens on 127.0.0.1");
    let ip = Ipv4Addr::new(bytes[23], bytes[24], bytes[25], bytes[26]);
    SocketAddr::new(IpAddr::V4(ip), u16::from_le_bytes([bytes[21], bytes[22]]))
}

fn id_of(info: &RootInfo) -> u64 {
    u64::from_le_bytes(info.as_bytes()[12..20].try_into().unwrap())
}

/// The secret only the holders of the root info know.
fn secret_of(info: &RootInfo) -> [u8; 16] {
    info.as_bytes()[39..55].try_into().unwrap()
}

/// A join frame asking for `rank` of `ranks` of communicator `id`, proving it holds the root
/// info with `secret`.
fn join_frame(id: u64, secret: [u8; 16], ranks: u32, rank: u32) -> Vec<u8> {
    let mut frame = b"BRDSIMJN".to_vec();
    frame.extend_from_slice(&id.to_le_bytes());
    frame.extend_from_slice(&secret);
    frame.extend_from_slice(&ranks.to_le_bytes());
    frame.extend_from_slice(&rank.to_le_bytes());
    frame
}

/// Reads a status frame: its HCCL code and message.
fn read_status(stream: &mut TcpStream) -> (u32, String) {
    let mut header = [0u8; 16];
    stream.read_exact(&mut header).unwrap();
    assert_eq!(&header[..8], b"BRDSIMST");
    let code = u32::from_le_bytes(header[8..12].try_into().unwrap());
    let mut message = vec![0u8; u32::from_le_bytes(header[12..16].try_into().unwrap()) as usize];
    stream.read_exact(&mut message).unwrap();
    (code, String::from_utf8(message).unwrap())
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream
}

/// `count` connections to `addr` that never send a byte.
fn silent_connections(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    (0..count).map(|_| connect(addr)).collect()
}

/// An HCCL timeout's message.
fn timeout_message(result: JoinResult) -> String {
    match result {
        Err(HalError::Native {
            name: "HCCL_E_TIMEOUT",
            message,
            ..
        }) => message,
        other => panic!("expected HCCL_E_TIMEOUT, got {other:?}"),
    }
}

/// Ten connections that never send a join, queued before the real rank: rank 0 used to wait
/// a second for each, admit rank 1 after rank 1 had given up, and return `Ok` alone.
#[test]
fn silent_connections_do_not_split_the_outcome() {
    let info = RemoteGroup::root_info().unwrap();
    let _silent = silent_connections(listener_of(&info), 10);
    let wait = Duration::from_secs(2);
    let rank_0 = join(&info, 2, 0, wait);
    let rank_1 = join(&info, 2, 1, wait);
    let rank_1 = outcome(rank_1).expect("rank 1 joins although silent connections came first");
    let rank_0 = outcome(rank_0).unwrap();
    assert_eq!(rank_0.id(), rank_1.id());
}

/// Two hundred silent connections held at once, made in two waves of a hundred (a listener
/// queues at most 128 unaccepted ones): rank 0 holds at most 64 of them, closing the oldest
/// for newer ones long before their own wait (a second) runs out, and admits the real ranks
/// that come after the flood, well within its timeout.
#[test]
fn a_flood_of_silent_connections_is_bounded_and_the_ranks_still_join() {
    const WAVE: usize = 100;
    const HELD: usize = 64;
    let info = RemoteGroup::root_info().unwrap();
    let started = Instant::now();
    let rank_0 = join(&info, 3, 0, WAIT);
    let mut silent = Vec::new();
    for wave in 1..=2 {
        let connected = Instant::now();
        silent.extend(silent_connections(listener_of(&info), WAVE));
        loop {
            let closed = silent.iter().filter(|s| closed_by_peer(s)).count();
            if closed >= wave * WAVE - HELD {
                break;
            }
            assert!(
                connected.elapsed() < Duration::from_millis(900),
                "wave {wave}: only {closed} of {} silent connections were closed",
                wave * WAVE
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
    let others = [join(&info, 3, 1, WAIT), join(&info, 3, 2, WAIT)];
    outcome(rank_0).unwrap();
    assert!(started.elapsed() < WAIT, "took {:?}", started.elapsed());
    for other in others {
        outcome(other).unwrap();
    }
}

/// Whether the other end closed `stream` (end of file or a reset), without blocking.
fn closed_by_peer(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = match stream.peek(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

/// A peer that does not hold the root info cannot take a real rank's place, even knowing the
/// communicator's id (which rank 0 names in its refusals): its join is refused to it alone,
/// and the real ranks form the group.
#[test]
fn a_peer_without_the_root_info_cannot_take_a_ranks_place() {
    let info = RemoteGroup::root_info().unwrap();
    let addr = listener_of(&info);
    let rank_0 = join(&info, 2, 0, WAIT);
    // Learn the id from a refusal.
    let mut probe = connect(addr);
    probe.write_all(&join_frame(0, [0; 16], 2, 1)).unwrap();
    let (code, message) = read_status(&mut probe);
    assert_eq!(code, 1, "{message}");
    let id = message
        .rsplit(' ')
        .next()
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .expect("the refusal names the communicator");
    assert_eq!(id, id_of(&info));
    let mut impostor = connect(addr);
    impostor.write_all(&join_frame(id, [0; 16], 2, 1)).unwrap();
    let (code, message) = read_status(&mut impostor);
    assert_eq!(code, 1, "the impostor is refused: {message}");
    assert!(message.contains("does not carry the secret"), "{message}");
    let rank_1 = outcome(join(&info, 2, 1, WAIT)).expect("the real rank 1 joins");
    assert_eq!(outcome(rank_0).unwrap().id(), rank_1.id());
}

/// Rank 1 gives up (its timeout is short) before rank 2 comes: rank 0 used to keep its dead
/// connection and form the group with ranks 0 and 2. Now every rank fails with a timeout, and
/// ranks 0 and 2 name rank 1.
#[test]
fn a_rank_that_gives_up_fails_the_rendezvous_on_every_rank() {
    let info = RemoteGroup::root_info().unwrap();
    let rank_0 = join(&info, 3, 0, Duration::from_secs(1));
    let rank_1 = join(&info, 3, 1, Duration::from_millis(200));
    thread::sleep(Duration::from_millis(400));
    let rank_2 = join(&info, 3, 2, WAIT);
    let gave_up = timeout_message(outcome(rank_1));
    assert!(gave_up.contains("rank 1"), "{gave_up}");
    let at_0 = timeout_message(outcome(rank_0));
    let at_2 = timeout_message(outcome(rank_2));
    assert_eq!(at_0, at_2);
    assert!(at_0.contains("rank(s) 1 of communicator"), "{at_0}");
}

/// A rank that leaves just as the group forms (its timeout passing at that moment) fails the
/// rendezvous on every other rank too, with one error naming it.
#[test]
fn a_rank_that_leaves_as_the_group_forms_fails_it_on_every_rank() {
    let info = RemoteGroup::root_info().unwrap();
    let rank_0 = join(&info, 3, 0, WAIT);
    let mut leaver = connect(listener_of(&info));
    leaver
        .write_all(&join_frame(id_of(&info), secret_of(&info), 3, 1))
        .unwrap();
    let rank_2 = join(&info, 3, 2, WAIT);
    // The first answer comes once every rank is in; the leaver leaves on hearing it.
    let (code, message) = read_status(&mut leaver);
    assert_eq!(code, 0, "{message}");
    drop(leaver);
    let at_0 = outcome(rank_0).unwrap_err();
    let at_2 = outcome(rank_2).unwrap_err();
    assert_eq!(at_0, at_2);
    assert!(at_0.to_string().contains("rank 1 left"), "{at_0}");
}

/// `Duration::MAX` is a natural "wait for ever": joining with it does not overflow the clock.
#[test]
fn a_timeout_of_duration_max_waits_without_end() {
    let info = RemoteGroup::root_info().unwrap();
    let others = [
        join(&info, 3, 1, Duration::MAX),
        join(&info, 3, 2, Duration::MAX),
    ];
    let rank_0 = RemoteGroup::join(&info, 3, 0, Duration::MAX).unwrap();
    let groups: Vec<_> = others.into_iter().map(|o| outcome(o).unwrap()).collect();
    assert!(groups.iter().all(|g| g.id() == rank_0.id()));
}
