//! [`TcpRootInfoTransport`] against peers that do not follow its protocol, over real sockets
//! on 127.0.0.1: connections that ask and leave, fetches that gave up while queued, silent
//! connections one after the other or by the hundred, and a timeout of `Duration::MAX`. Each
//! test is bounded in connections and in time (a few seconds at worst).
//!
//! The bad peers speak the documented wire format by hand (`BRAIDRQ2` and a rank to ask).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use braid_collective::{RootInfo, RootInfoTransport, TcpRootInfoTransport, ROOT_INFO_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::sleep;

/// What rank 1 sends first (the transport's documented request: the magic, then the rank as a
/// little-endian `u32`).
const REQUEST: &[u8; 12] = b"BRAIDRQ2\x01\x00\x00\x00";
/// What a real rank and the publication wait at most, in the tests that must succeed.
const WAIT: Duration = Duration::from_secs(3);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn info(fill: u8) -> RootInfo {
    RootInfo::from_bytes(&[fill; ROOT_INFO_BYTES]).unwrap()
}

async fn rank_0(ranks: usize) -> TcpRootInfoTransport {
    TcpRootInfoTransport::bind("127.0.0.1:0".parse().unwrap(), ranks)
        .await
        .unwrap()
}

/// `count` connections to `addr` that never send a byte.
async fn silent_connections(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut silent = Vec::with_capacity(count);
    for _ in 0..count {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    silent
}

/// `ranks` real ranks fetching from `addr` at once, each waiting at most `wait`.
async fn fetch_all(
    addr: SocketAddr,
    ranks: usize,
    wait: Duration,
) -> Vec<Result<RootInfo, braid_collective::TransportError>> {
    let fetches: Vec<_> = (1..=ranks as u32)
        .map(|rank| {
            tokio::spawn(async move { TcpRootInfoTransport::connect(addr, rank).fetch(wait).await })
        })
        .collect();
    let mut fetched = Vec::new();
    for fetch in fetches {
        fetched.push(fetch.await.unwrap());
    }
    fetched
}

/// A connection that sends the request and closes without reading is not a rank that has the
/// root info: the publication goes on until the real rank has it.
#[test]
fn a_connection_that_asks_and_leaves_is_not_a_served_rank() {
    runtime().block_on(async {
        let root = rank_0(1).await;
        let addr = root.local_addr();
        let mut leaver = TcpStream::connect(addr).await.unwrap();
        leaver.write_all(REQUEST).await.unwrap();
        drop(leaver);
        let real = async {
            sleep(Duration::from_millis(50)).await;
            let real = TcpRootInfoTransport::connect(addr, 1);
            real.fetch(WAIT).await
        };
        let sent = info(1);
        let (published, fetched) = tokio::join!(root.publish(&sent, WAIT), real);
        published.unwrap();
        assert_eq!(fetched.unwrap(), info(1));
    });
}

/// A fetch that timed out while its connection was still queued on rank 0's listener left
/// its request behind; serving that request does not count as serving a rank.
#[test]
fn an_earlier_fetch_that_timed_out_is_not_a_served_rank() {
    runtime().block_on(async {
        let root = rank_0(1).await;
        let addr = root.local_addr();
        let early = TcpRootInfoTransport::connect(addr, 1)
            .fetch(Duration::from_millis(100))
            .await;
        assert!(early.is_err(), "nothing was published yet: {early:?}");
        let real = async {
            sleep(Duration::from_millis(50)).await;
            let real = TcpRootInfoTransport::connect(addr, 1);
            real.fetch(WAIT).await
        };
        let sent = info(2);
        let (published, fetched) = tokio::join!(root.publish(&sent, WAIT), real);
        published.unwrap();
        assert_eq!(fetched.unwrap(), info(2));
    });
}

/// Twenty connections that never ask, queued before the real rank: served one at a time
/// they would hold the publication for twenty seconds; served side by side the real rank is
/// served at once.
#[test]
fn silent_connections_do_not_hold_up_the_real_ranks() {
    runtime().block_on(async {
        let root = rank_0(1).await;
        let addr = root.local_addr();
        let _silent = silent_connections(addr, 20).await;
        let started = Instant::now();
        let sent = info(3);
        let real = TcpRootInfoTransport::connect(addr, 1);
        let (published, fetched) = tokio::join!(root.publish(&sent, WAIT), real.fetch(WAIT));
        published.unwrap();
        assert_eq!(fetched.unwrap(), info(3));
        assert!(started.elapsed() < WAIT, "took {:?}", started.elapsed());
    });
}

/// Two hundred silent connections held at once, made in two waves of a hundred (a listener
/// queues at most 128 unaccepted ones): rank 0 holds at most 64 of them, closing the oldest for
/// newer ones long before their own wait (a second) runs out, and serves the real ranks that
/// come after the flood.
#[test]
fn a_flood_of_silent_connections_is_bounded_and_real_ranks_are_served() {
    const WAVE: usize = 100;
    const HELD: usize = 64;
    runtime().block_on(async {
        let root = rank_0(2).await;
        let addr = root.local_addr();
        let closed = Arc::new(AtomicUsize::new(0));
        let flood = async {
            for wave in 1..=2 {
                let connected = Instant::now();
                for mut stream in silent_connections(addr, WAVE).await {
                    let closed = closed.clone();
                    tokio::spawn(async move {
                        let mut byte = [0u8; 1];
                        // Rank 0 closes a connection it drops: end of file or a reset.
                        if !matches!(stream.read(&mut byte).await, Ok(1..)) {
                            closed.fetch_add(1, Ordering::SeqCst);
                        }
                    });
                }
                while closed.load(Ordering::SeqCst) < wave * WAVE - HELD {
                    assert!(
                        connected.elapsed() < Duration::from_millis(900),
                        "wave {wave}: only {} of {} silent connections were closed",
                        closed.load(Ordering::SeqCst),
                        wave * WAVE
                    );
                    sleep(Duration::from_millis(5)).await;
                }
            }
            fetch_all(addr, 2, WAIT).await
        };
        let sent = info(4);
        let (published, fetched) = tokio::join!(root.publish(&sent, WAIT), flood);
        published.unwrap();
        for fetched in fetched {
            assert_eq!(fetched.unwrap(), info(4));
        }
    });
}

/// `Duration::MAX` is a natural "wait for ever": both sides take it without overflowing the
/// clock.
#[test]
fn a_timeout_of_duration_max_waits_without_end() {
    runtime().block_on(async {
        let root = rank_0(2).await;
        let addr = root.local_addr();
        let sent = info(5);
        let (published, fetched) = tokio::join!(
            root.publish(&sent, Duration::MAX),
            fetch_all(addr, 2, Duration::MAX)
        );
        published.unwrap();
        for fetched in fetched {
            assert_eq!(fetched.unwrap(), info(5));
        }
    });
}

/// A rank that fetches twice (a retry) is one rank: the publication still waits for the rank
/// that has not fetched, and its timeout names it.
#[test]
fn a_rank_that_fetches_twice_is_counted_once() {
    runtime().block_on(async {
        let root = rank_0(2).await;
        let addr = root.local_addr();
        let retrying = TcpRootInfoTransport::connect(addr, 1);
        let twice = async {
            let first = retrying.fetch(WAIT).await;
            let second = retrying.fetch(WAIT).await;
            (first, second)
        };
        let sent = info(6);
        let wait = Duration::from_millis(500);
        let (published, (first, second)) = tokio::join!(root.publish(&sent, wait), twice);
        assert_eq!(first.unwrap(), info(6));
        assert_eq!(second.unwrap(), info(6));
        let err = published.expect_err("rank 2 never fetched");
        let text = err.to_string();
        assert!(
            text.contains("1 of 2 ranks") && text.contains("rank 2"),
            "{text}"
        );
    });
}
