//! [`TcpRootInfoTransport`]: the root info over a TCP listener (feature `tcp`).
//!
//! The wire format: a fetching rank sends the 8 bytes `BRAIDRQ2` and its rank as a
//! little-endian `u32`; the publishing rank answers with the 8 bytes `BRAIDRI1`, the payload
//! length as a little-endian `u32`, and the root info's bytes; the fetching rank acknowledges
//! the whole answer with the 8 bytes `BRAIDAK1`, and only then does rank 0 count that rank as
//! served. Rank 0 counts ranks, not fetches: a rank that fetches again (a retry) is served
//! again and counted once. A rank the publication does not serve (0, or past the ranks it
//! was bound for) is answered `BRAIDNR1` and the highest rank served, a little-endian `u32`
//! ([`TransportError::RankNotServed`]). An answer that is anything else is a typed
//! [`TransportError::NotRootInfo`].

use braid_stream_core::sync::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use super::{RootInfoTransport, TransportError};
use async_trait::async_trait;
use braid_stream_core::collective::{RootInfo, ROOT_INFO_BYTES};
use braid_stream_core::deadline::Deadline;
use futures::future::{abortable, AbortHandle};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{sleep_until, timeout_at};

/// What a fetching rank sends first, before its rank, so that a stray connection is not served.
const REQUEST_MAGIC: [u8; 8] = *b"BRAIDRQ2";
/// Magic and rank.
const REQUEST_BYTES: usize = 12;
/// What starts the publishing rank's refusal of a rank it does not serve.
const REFUSAL_MAGIC: [u8; 8] = *b"BRAIDNR1";
/// What starts the publishing rank's answer.
const ANSWER_MAGIC: [u8; 8] = *b"BRAIDRI1";
/// What a fetching rank sends once it holds the whole root info: rank 0 counts it then.
const ACK_MAGIC: [u8; 8] = *b"BRAIDAK1";
/// Magic and length.
const HEADER_BYTES: usize = 12;
/// How long the publishing rank gives one connection to ask, take the answer and acknowledge
/// it before dropping it (a real rank does all three at once).
const CONNECTION_WAIT: Duration = Duration::from_secs(1);
/// The most connections the publishing rank serves at once; a newer one closes the oldest, so
/// that a flood of silent connections cannot keep the real ranks out.
const MAX_HELD: usize = 64;
/// Pause between two connection attempts while rank 0 is not listening yet.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// A [`RootInfoTransport`] over TCP: rank 0 listens ([`TcpRootInfoTransport::bind`]) and the
/// other ranks connect to its address ([`TcpRootInfoTransport::connect`]).
///
/// [`publish`](RootInfoTransport::publish) serves ranks 1 to the number given to
/// [`bind`](Self::bind) and returns once each of them has acknowledged the whole root info
/// (a rank that fetches twice counts once), so it needs no background task and
/// works on a current-thread runtime. It serves connections side by side, gives each one a
/// second to ask, take the answer and acknowledge it, and holds at most 64 at once (a newer
/// connection closes the oldest): connections that ask and leave, stay silent or come by the
/// hundred are not counted and do not keep the real ranks waiting. On the fetching side
/// [`fetch`](RootInfoTransport::fetch) retries the connection until rank 0 listens or the
/// timeout passes. On the publishing side `fetch` returns what was last published, so every
/// rank can end with the same call. A timeout too long for the clock (`Duration::MAX`) waits
/// without end.
///
/// ```
/// use std::time::Duration;
/// use braid_collective::{RootInfo, RootInfoTransport, TcpRootInfoTransport, ROOT_INFO_BYTES};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let root = TcpRootInfoTransport::bind("127.0.0.1:0".parse().unwrap(), 1).await.unwrap();
/// let other = TcpRootInfoTransport::connect(root.local_addr(), 1);
/// let info = RootInfo::from_bytes(&[7; ROOT_INFO_BYTES]).unwrap();
/// let wait = Duration::from_secs(5);
/// let (published, fetched) = tokio::join!(root.publish(&info, wait), other.fetch(wait));
/// published.unwrap();
/// assert_eq!(fetched.unwrap(), info);
/// # });
/// ```
#[derive(Debug)]
pub struct TcpRootInfoTransport {
    side: Side,
}

#[derive(Debug)]
enum Side {
    Publishing {
        listener: TcpListener,
        addr: SocketAddr,
        /// Ranks to serve per publication.
        ranks: usize,
        published: Mutex<Option<RootInfo>>,
    },
    Fetching {
        addr: SocketAddr,
        /// The rank fetching.
        rank: u32,
    },
}

impl TcpRootInfoTransport {
    /// Rank 0's side: listens on `addr` (port 0 picks a free port: see
    /// [`local_addr`](Self::local_addr)) and serves each publication to the `ranks` other
    /// ranks, 1 to `ranks`.
    pub async fn bind(addr: SocketAddr, ranks: usize) -> Result<Self, TransportError> {
        let io = |source| TransportError::Io {
            addr,
            during: "binding",
            source,
        };
        let listener = TcpListener::bind(addr).await.map_err(io)?;
        let addr = listener.local_addr().map_err(io)?;
        Ok(TcpRootInfoTransport {
            side: Side::Publishing {
                listener,
                addr,
                ranks,
                published: Mutex::new(None),
            },
        })
    }

    /// Rank `rank`'s side (1 or more): fetches from rank 0 at `addr`, naming its rank so that
    /// rank 0 counts it once however often it fetches. Connects only when fetching.
    pub fn connect(addr: SocketAddr, rank: u32) -> Self {
        TcpRootInfoTransport {
            side: Side::Fetching { addr, rank },
        }
    }

    /// The address rank 0 listens on (with the port chosen when bound to port 0), or the
    /// address a fetching side connects to.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.side {
            Side::Publishing { addr, .. } | Side::Fetching { addr, .. } => *addr,
        }
    }
}

#[async_trait]
impl RootInfoTransport for TcpRootInfoTransport {
    /// Serves `info` to ranks 1 to the number given to `bind`; returns once each has
    /// acknowledged it. Connections that do not ask for a root info, or leave before
    /// acknowledging it, are dropped without counting; a rank that fetches again is served
    /// and counted once. A timeout names the ranks still missing.
    async fn publish(&self, info: &RootInfo, timeout: Duration) -> Result<(), TransportError> {
        let Side::Publishing {
            listener,
            addr,
            ranks,
            published,
        } = &self.side
        else {
            return Err(TransportError::WrongSide(format!(
                "publish on a transport that fetches from {}: only rank 0's side (bind) publishes",
                self.local_addr()
            )));
        };
        *published.lock() = Some(info.clone());
        let deadline = Deadline::after(timeout);
        let mut answer = Vec::with_capacity(HEADER_BYTES + ROOT_INFO_BYTES);
        answer.extend_from_slice(&ANSWER_MAGIC);
        answer.extend_from_slice(&(ROOT_INFO_BYTES as u32).to_le_bytes());
        answer.extend_from_slice(info.as_bytes());
        // The connections being served, by accept order: the first is the oldest.
        let mut held = FuturesUnordered::new();
        let mut abort_handles: BTreeMap<u64, AbortHandle> = BTreeMap::new();
        let mut accepted = 0u64;
        let mut served = BTreeSet::new();
        let highest = u32::try_from(*ranks).unwrap_or(u32::MAX);
        while served.len() < *ranks {
            tokio::select! {
                connection = listener.accept() => {
                    let stream = match connection {
                        Ok((stream, _)) => stream,
                        Err(error) if connection_gone(&error) => continue,
                        Err(source) => {
                            return Err(TransportError::Io {
                                addr: *addr,
                                during: "accepting",
                                source,
                            })
                        }
                    };
                    if abort_handles.len() >= MAX_HELD {
                        if let Some((_, oldest)) = abort_handles.pop_first() {
                            oldest.abort();
                        }
                    }
                    let own_deadline = deadline.min(Deadline::after(CONNECTION_WAIT));
                    let (serving, abort) =
                        abortable(serve(stream, &answer, highest, own_deadline));
                    let number = accepted;
                    accepted += 1;
                    abort_handles.insert(number, abort);
                    held.push(async move { (number, serving.await) });
                }
                Some((number, outcome)) = held.next() => {
                    abort_handles.remove(&number);
                    match outcome {
                        Ok(Ok(rank)) => {
                            if !served.insert(rank) {
                                tracing::debug!(%addr, rank, "a rank fetched the root info again");
                            }
                        }
                        Ok(Err(why)) => tracing::debug!(%addr, why, "dropped a connection"),
                        Err(_) => tracing::debug!(%addr, "closed the oldest connection for a newer one"),
                    }
                }
                () = until(deadline) => {
                    return Err(TransportError::Timeout {
                        addr: *addr,
                        waited: timeout,
                        detail: format!(
                            "{} of {ranks} ranks fetched the root info; {}",
                            served.len(),
                            missing(&served, highest)
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    async fn fetch(&self, timeout: Duration) -> Result<RootInfo, TransportError> {
        let (addr, rank) = match &self.side {
            Side::Fetching { addr, rank } => (*addr, *rank),
            Side::Publishing { published, .. } => {
                return published.lock().clone().ok_or_else(|| {
                    TransportError::WrongSide(
                        "fetch on rank 0's side before anything was published".to_owned(),
                    )
                })
            }
        };
        let deadline = Deadline::after(timeout);
        let timed_out = |detail: &str| TransportError::Timeout {
            addr,
            waited: timeout,
            detail: detail.to_owned(),
        };
        let mut stream = loop {
            match within(deadline, TcpStream::connect(addr)).await {
                Some(Ok(stream)) => break stream,
                Some(Err(error)) if rank_0_not_listening_yet(&error) => {
                    if deadline.has_passed() {
                        return Err(timed_out("rank 0 was not listening"));
                    }
                    until(deadline.min(Deadline::after(RETRY_PAUSE))).await;
                }
                Some(Err(source)) => {
                    return Err(TransportError::Io {
                        addr,
                        during: "connecting",
                        source,
                    })
                }
                None => return Err(timed_out("rank 0 was not listening")),
            }
        };
        let io = |during, source| TransportError::Io {
            addr,
            during,
            source,
        };
        let mut request = [0u8; REQUEST_BYTES];
        request[..8].copy_from_slice(&REQUEST_MAGIC);
        request[8..].copy_from_slice(&rank.to_le_bytes());
        within(deadline, stream.write_all(&request))
            .await
            .ok_or_else(|| timed_out("rank 0 did not take the request"))?
            .map_err(|e| io("requesting", e))?;
        let mut header = [0u8; HEADER_BYTES];
        let received = read_all(&mut stream, &mut header, deadline)
            .await
            .map_err(|e| io("receiving", e))?
            .ok_or_else(|| timed_out("rank 0 did not send the root info"))?;
        let not_root_info = |reason| TransportError::NotRootInfo { addr, reason };
        if received == HEADER_BYTES && header[..8] == REFUSAL_MAGIC {
            let ranks = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
            return Err(TransportError::RankNotServed { addr, rank, ranks });
        }
        check_header(&header[..received]).map_err(not_root_info)?;
        let mut payload = vec![0u8; ROOT_INFO_BYTES];
        let received = read_all(&mut stream, &mut payload, deadline)
            .await
            .map_err(|e| io("receiving", e))?
            .ok_or_else(|| timed_out("rank 0 did not send the whole root info"))?;
        let info = RootInfo::from_bytes(&payload[..received]).ok_or_else(|| {
            not_root_info(format!(
                "the connection closed after {received} of {ROOT_INFO_BYTES} bytes"
            ))
        })?;
        // Rank 0 counts this rank only once it hears that the whole root info arrived.
        within(deadline, stream.write_all(&ACK_MAGIC))
            .await
            .ok_or_else(|| timed_out("rank 0 did not take the acknowledgement"))?
            .map_err(|e| io("acknowledging", e))?;
        Ok(info)
    }
}

/// Rank 0's side of one connection: the request, the answer, the acknowledgement, all
/// before `deadline`; the rank served (1 to `highest`), or why the connection is not one.
async fn serve(
    mut stream: TcpStream,
    answer: &[u8],
    highest: u32,
    deadline: Deadline,
) -> Result<u32, String> {
    let exchange = async {
        let mut request = [0u8; REQUEST_BYTES];
        stream
            .read_exact(&mut request)
            .await
            .map_err(|e| format!("no request: {e}"))?;
        if request[..8] != REQUEST_MAGIC {
            return Err("it did not ask for a root info".to_owned());
        }
        let rank = u32::from_le_bytes([request[8], request[9], request[10], request[11]]);
        if !(1..=highest).contains(&rank) {
            let mut refusal = REFUSAL_MAGIC.to_vec();
            refusal.extend_from_slice(&highest.to_le_bytes());
            let _ = stream.write_all(&refusal).await;
            return Err(format!(
                "it asked as rank {rank}; this publication serves ranks 1 to {highest}"
            ));
        }
        stream
            .write_all(answer)
            .await
            .map_err(|e| format!("it left before the answer: {e}"))?;
        let mut ack = [0u8; 8];
        stream
            .read_exact(&mut ack)
            .await
            .map_err(|e| format!("it left without acknowledging the root info: {e}"))?;
        if ack != ACK_MAGIC {
            return Err("it answered the root info with something else".to_owned());
        }
        Ok(rank)
    };
    within(deadline, exchange)
        .await
        .unwrap_or_else(|| Err(format!("it did not finish within {CONNECTION_WAIT:?}")))
}

/// The ranks of 1 to `highest` not in `served`, for a timeout: "still missing: rank 2", the
/// first few of many.
fn missing(served: &BTreeSet<u32>, highest: u32) -> String {
    const SHOWN: usize = 8;
    let missing: Vec<u32> = (1..=highest).filter(|r| !served.contains(r)).collect();
    let mut names: Vec<String> = missing.iter().take(SHOWN).map(u32::to_string).collect();
    if missing.len() > SHOWN {
        names.push(format!("and {} more", missing.len() - SHOWN));
    }
    let noun = if missing.len() == 1 { "rank" } else { "ranks" };
    format!("still missing: {noun} {}", names.join(", "))
}

/// `future`'s output, or `None` once `deadline` passes first.
async fn within<T>(deadline: Deadline, future: impl Future<Output = T>) -> Option<T> {
    match deadline.instant() {
        Some(at) => timeout_at(at.into(), future).await.ok(),
        None => Some(future.await),
    }
}

/// Returns at `deadline`; never, for a wait without end.
async fn until(deadline: Deadline) {
    match deadline.instant() {
        Some(at) => sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Accept errors that concern one connection, which left before it was accepted.
fn connection_gone(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionReset, Interrupted};
    matches!(
        error.kind(),
        ConnectionAborted | ConnectionReset | Interrupted
    )
}

/// Fills `buf` from `stream` until it is full or the peer closes; the bytes read, or `None`
/// at the deadline.
async fn read_all(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Deadline,
) -> std::io::Result<Option<usize>> {
    let mut filled = 0;
    while filled < buf.len() {
        match within(deadline, stream.read(&mut buf[filled..])).await {
            None => return Ok(None),
            Some(Ok(0)) => break,
            Some(Ok(n)) => filled += n,
            Some(Err(e)) => return Err(e),
        }
    }
    Ok(Some(filled))
}

/// Connection errors that mean rank 0 has not bound its listener yet.
fn rank_0_not_listening_yet(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
    matches!(error.kind(), ConnectionRefused | ConnectionReset)
}

/// Checks the answer's header: full, with the magic and a root info's length.
fn check_header(header: &[u8]) -> Result<(), String> {
    if header.len() < HEADER_BYTES {
        return Err(format!(
            "the connection closed after {} bytes, before the {HEADER_BYTES}-byte header",
            header.len()
        ));
    }
    if header[..8] != ANSWER_MAGIC {
        return Err(format!(
            "wrong magic {:02x?} (expected {:02x?})",
            &header[..8],
            ANSWER_MAGIC
        ));
    }
    let length = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if length != ROOT_INFO_BYTES {
        return Err(format!(
            "announced {length} bytes, a root info has {ROOT_INFO_BYTES}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::{sleep, Instant};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn any_local_port() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    fn info(fill: u8) -> RootInfo {
        let mut bytes = [fill; ROOT_INFO_BYTES];
        bytes[0] = 0xA5;
        RootInfo::from_bytes(&bytes).unwrap()
    }

    const WAIT: Duration = Duration::from_secs(5);

    /// A port nothing listens on (bound once, then released).
    fn free_port() -> SocketAddr {
        std::net::TcpListener::bind(any_local_port())
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn every_rank_fetches_what_rank_0_published_even_when_rank_0_binds_last() {
        runtime().block_on(async {
            let addr = free_port();
            let others: Vec<_> = (1..=3)
                .map(|rank| {
                    tokio::spawn(async move {
                        let transport: Box<dyn RootInfoTransport> =
                            Box::new(TcpRootInfoTransport::connect(addr, rank));
                        transport.fetch(WAIT).await
                    })
                })
                .collect();
            // The others start first and retry until rank 0 listens.
            sleep(Duration::from_millis(60)).await;
            let root = TcpRootInfoTransport::bind(addr, 3).await.unwrap();
            assert_eq!(root.local_addr(), addr);
            root.publish(&info(3), WAIT).await.unwrap();
            for other in others {
                assert_eq!(other.await.unwrap().unwrap(), info(3));
            }
            assert_eq!(root.fetch(WAIT).await.unwrap(), info(3));
        });
    }

    #[test]
    fn a_second_publication_serves_a_second_round() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 1)
                .await
                .unwrap();
            assert_ne!(root.local_addr().port(), 0);
            let other = TcpRootInfoTransport::connect(root.local_addr(), 1);
            for fill in [1, 2] {
                let sent = info(fill);
                let (published, fetched) =
                    tokio::join!(root.publish(&sent, WAIT), other.fetch(WAIT));
                published.unwrap();
                assert_eq!(fetched.unwrap(), sent);
            }
        });
    }

    #[test]
    fn fetch_times_out_when_rank_0_never_listens() {
        runtime().block_on(async {
            let addr = free_port();
            let wait = Duration::from_millis(150);
            let started = Instant::now();
            let err = TcpRootInfoTransport::connect(addr, 1)
                .fetch(wait)
                .await
                .unwrap_err();
            assert!(started.elapsed() >= wait);
            assert!(started.elapsed() < WAIT);
            match &err {
                TransportError::Timeout {
                    addr: at, waited, ..
                } => {
                    assert_eq!((*at, *waited), (addr, wait))
                }
                other => panic!("expected a timeout, got {other:?}"),
            }
            assert!(err.to_string().contains(&addr.to_string()), "{err}");
        });
    }

    #[test]
    fn publish_times_out_naming_how_many_ranks_fetched() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 2)
                .await
                .unwrap();
            let other = TcpRootInfoTransport::connect(root.local_addr(), 1);
            let wait = Duration::from_millis(300);
            let sent = info(9);
            let (published, fetched) = tokio::join!(root.publish(&sent, wait), other.fetch(wait));
            assert_eq!(fetched.unwrap(), info(9));
            let err = published.unwrap_err();
            assert!(matches!(err, TransportError::Timeout { .. }), "{err:?}");
            assert!(err.to_string().contains("1 of 2 ranks"), "{err}");
            assert!(err.to_string().contains("still missing: rank 2"), "{err}");
        });
    }

    /// A server at `addr` that answers every connection with `reply` and closes.
    async fn impostor(reply: Vec<u8>) -> SocketAddr {
        let listener = TcpListener::bind(any_local_port()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                // Read the request first: closing with unread bytes would reset the connection.
                let mut request = [0u8; REQUEST_BYTES];
                let _ = stream.read_exact(&mut request).await;
                let _ = stream.write_all(&reply).await;
            }
        });
        addr
    }

    async fn fetch_from_impostor(reply: Vec<u8>) -> String {
        let addr = impostor(reply).await;
        match TcpRootInfoTransport::connect(addr, 1).fetch(WAIT).await {
            Err(TransportError::NotRootInfo { addr: at, reason }) => {
                assert_eq!(at, addr);
                reason
            }
            other => panic!("expected NotRootInfo, got {other:?}"),
        }
    }

    fn frame(magic: &[u8; 8], length: u32, payload: usize) -> Vec<u8> {
        let mut bytes = magic.to_vec();
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend(std::iter::repeat_n(1u8, payload));
        bytes
    }

    #[test]
    fn a_peer_that_sends_something_else_is_a_typed_error() {
        runtime().block_on(async {
            let http = b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec();
            assert!(fetch_from_impostor(http).await.contains("wrong magic"));
            let wrong_length = frame(&ANSWER_MAGIC, 16, 16);
            let reason = fetch_from_impostor(wrong_length).await;
            assert!(reason.contains("announced 16 bytes"), "{reason}");
            let truncated = frame(&ANSWER_MAGIC, ROOT_INFO_BYTES as u32, 100);
            let reason = fetch_from_impostor(truncated).await;
            assert!(reason.contains("after 100 of 4108 bytes"), "{reason}");
            let reason = fetch_from_impostor(b"BRAID".to_vec()).await;
            assert!(reason.contains("after 5 bytes"), "{reason}");
            // A well-formed answer from the same kind of server is accepted.
            let mut good = frame(&ANSWER_MAGIC, ROOT_INFO_BYTES as u32, 0);
            good.extend_from_slice(info(4).as_bytes());
            let addr = impostor(good).await;
            let fetched = TcpRootInfoTransport::connect(addr, 1).fetch(WAIT).await;
            assert_eq!(fetched.unwrap(), info(4));
        });
    }

    #[test]
    fn stray_connections_are_not_counted_as_ranks() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 1)
                .await
                .unwrap();
            let addr = root.local_addr();
            let stray = async {
                let mut stream = TcpStream::connect(addr).await.unwrap();
                stream.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
                // Then a real rank.
                sleep(Duration::from_millis(30)).await;
                TcpRootInfoTransport::connect(addr, 1).fetch(WAIT).await
            };
            let sent = info(5);
            let (published, fetched) = tokio::join!(root.publish(&sent, WAIT), stray);
            published.unwrap();
            assert_eq!(fetched.unwrap(), info(5));
        });
    }

    #[test]
    fn a_rank_the_publication_does_not_serve_is_refused_naming_it() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 2)
                .await
                .unwrap();
            let addr = root.local_addr();
            let strays = async {
                let mut refused = Vec::new();
                for rank in [0, 3] {
                    let err = TcpRootInfoTransport::connect(addr, rank)
                        .fetch(WAIT)
                        .await
                        .unwrap_err();
                    refused.push(err);
                }
                let real = [1, 2].map(|rank| TcpRootInfoTransport::connect(addr, rank));
                let (one, two) = tokio::join!(real[0].fetch(WAIT), real[1].fetch(WAIT));
                (refused, one, two)
            };
            let sent = info(8);
            let (published, (refused, one, two)) =
                tokio::join!(root.publish(&sent, WAIT), strays);
            published.unwrap();
            assert_eq!((one.unwrap(), two.unwrap()), (info(8), info(8)));
            for (err, rank) in refused.iter().zip([0, 3]) {
                assert!(
                    matches!(err, TransportError::RankNotServed { rank: r, ranks: 2, .. } if *r == rank),
                    "{err:?}"
                );
                assert!(err.to_string().contains(&format!("rank {rank}")), "{err}");
            }
        });
    }

    #[test]
    fn many_missing_ranks_are_named_by_the_first_few() {
        let served = BTreeSet::from([2]);
        assert_eq!(missing(&served, 3), "still missing: ranks 1, 3");
        assert_eq!(
            missing(&BTreeSet::new(), 10),
            "still missing: ranks 1, 2, 3, 4, 5, 6, 7, 8, and 2 more"
        );
    }

    #[test]
    fn calls_on_the_wrong_side_are_typed_errors() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 1)
                .await
                .unwrap();
            let err = root.fetch(WAIT).await.unwrap_err();
            assert!(matches!(err, TransportError::WrongSide(_)), "{err:?}");
            let other = TcpRootInfoTransport::connect(root.local_addr(), 1);
            let err = other.publish(&info(1), WAIT).await.unwrap_err();
            assert!(err.to_string().contains("only rank 0"), "{err}");
        });
    }

    #[test]
    fn binding_an_address_in_use_names_it() {
        runtime().block_on(async {
            let root = TcpRootInfoTransport::bind(any_local_port(), 1)
                .await
                .unwrap();
            let err = TcpRootInfoTransport::bind(root.local_addr(), 1)
                .await
                .unwrap_err();
            match err {
                TransportError::Io { addr, during, .. } => {
                    assert_eq!((addr, during), (root.local_addr(), "binding"))
                }
                other => panic!("expected an i/o error, got {other:?}"),
            }
        });
    }
}
