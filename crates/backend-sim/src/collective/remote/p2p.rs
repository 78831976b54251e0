//! Point-to-point messages between two ranks of a communicator spanning processes: each rank
//! listens on `127.0.0.1` from its join on, and a send opens (once per sender and receiver) a
//! direct connection to its receiver, introduced by the communicator's id and secret and the
//! two ranks. A send writes its part (numbered on its pair) and waits for the receiver's
//! answer, its own part, so that both sides see both parts; the receiver reads the part from
//! that pair's connection. A connection that fails or times out is dropped on the side that
//! saw it (a send after a failed one opens a new connection). Each connection is taken out
//! of its map while a call uses it, so that a rank's calls with different peers run side by
//! side.

use super::wire::{self, Failure, Hccl, Secret};
use braid_stream_core::deadline::Deadline;
use braid_stream_core::sync::Mutex;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::sleep;
use std::time::Duration;

/// How often a receiver polls its listener for its sender's connection.
const POLL: Duration = Duration::from_millis(2);
/// The shortest socket wait (a zero one means "no timeout" to the standard library).
const MIN_SOCKET_WAIT: Duration = Duration::from_millis(1);
/// How long an accepted connection has to introduce itself.
const HELLO_WAIT: Duration = Duration::from_secs(1);
const HELLO_MAGIC: [u8; 8] = *b"BRDSIMP2";
const HELLO_BYTES: usize = 40;

/// One rank's side of the point-to-point connections.
#[derive(Debug)]
pub(super) struct PointToPoint {
    /// Where every rank listens, in rank order.
    pub(super) addrs: Vec<SocketAddr>,
    /// This rank's listener and the connections accepted on it, by sending rank.
    incoming: Mutex<Incoming>,
    /// The connections this rank opened, by receiving rank.
    outgoing: Mutex<HashMap<u32, TcpStream>>,
}

#[derive(Debug)]
struct Incoming {
    listener: TcpListener,
    from: HashMap<u32, TcpStream>,
}

/// Who a connection is for (the first bytes a sender writes).
#[derive(Clone, Copy)]
pub(super) struct Hello {
    pub(super) id: u64,
    pub(super) secret: Secret,
    pub(super) from: u32,
    pub(super) to: u32,
}

pub(super) fn encode_hello(hello: Hello) -> [u8; HELLO_BYTES] {
    let mut out = [0u8; HELLO_BYTES];
    out[..8].copy_from_slice(&HELLO_MAGIC);
    out[8..16].copy_from_slice(&hello.id.to_le_bytes());
    out[16..32].copy_from_slice(&hello.secret.0);
    out[32..36].copy_from_slice(&hello.from.to_le_bytes());
    out[36..40].copy_from_slice(&hello.to.to_le_bytes());
    out
}

fn decode_hello(bytes: &[u8; HELLO_BYTES]) -> Option<Hello> {
    if bytes[..8] != HELLO_MAGIC {
        return None;
    }
    Some(Hello {
        id: u64::from_le_bytes(bytes[8..16].try_into().ok()?),
        secret: Secret(bytes[16..32].try_into().ok()?),
        from: u32::from_le_bytes(bytes[32..36].try_into().ok()?),
        to: u32::from_le_bytes(bytes[36..40].try_into().ok()?),
    })
}

/// A socket wait of at most `timeout` (`Duration::MAX`: none).
fn socket_wait(timeout: Duration) -> Option<Duration> {
    (timeout != Duration::MAX).then(|| timeout.max(MIN_SOCKET_WAIT))
}

impl PointToPoint {
    /// Binds this rank's listener (before the other ranks learn its address).
    pub(super) fn listen() -> Result<TcpListener, Failure> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).and_then(|l| {
            l.set_nonblocking(true)?;
            Ok(l)
        });
        listener.map_err(|e| {
            Failure::new(
                Hccl::TcpConnect,
                format!("binding a point-to-point listener on 127.0.0.1: {e}"),
            )
        })
    }

    pub(super) fn new(listener: TcpListener, addrs: Vec<SocketAddr>) -> PointToPoint {
        PointToPoint {
            addrs,
            incoming: Mutex::new(Incoming {
                listener,
                from: HashMap::new(),
            }),
            outgoing: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `mine` (part `number` from `hello.from` to `hello.to`) and returns the
    /// receiver's answer: its call number and part.
    pub(super) fn send(
        &self,
        hello: Hello,
        number: u64,
        mine: &[u8],
        timeout: Duration,
    ) -> Result<(u64, Vec<u8>), Failure> {
        let peer = format!("rank {}", hello.to);
        let doing = format!("sending call {number} to {peer}");
        // Taken out while in use (the caller runs one call per pair at a time), so that
        // sends to other peers do not wait on this one; put back when it worked.
        let open = self.outgoing.lock().remove(&hello.to);
        let mut stream = match open {
            Some(stream) => stream,
            None => self.open(hello, timeout, &peer, &doing)?,
        };
        let answer = wire::write_part(&mut stream, number, mine)
            .map_err(|e| Failure::io(&peer, &doing, &e))
            .and_then(|()| wire::read_part(&mut stream, &peer, &doing))?;
        self.outgoing.lock().insert(hello.to, stream);
        Ok(answer)
    }

    /// Opens the connection to `hello.to` and introduces it.
    fn open(
        &self,
        hello: Hello,
        timeout: Duration,
        peer: &str,
        doing: &str,
    ) -> Result<TcpStream, Failure> {
        let addr = self.addrs[hello.to as usize];
        let left = if timeout == Duration::MAX {
            Duration::from_secs(3600)
        } else {
            timeout.max(MIN_SOCKET_WAIT)
        };
        let io = |e: io::Error| Failure::io(peer, doing, &e);
        let mut stream = TcpStream::connect_timeout(&addr, left).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(socket_wait(timeout)).map_err(io)?;
        stream.set_write_timeout(socket_wait(timeout)).map_err(io)?;
        stream.write_all(&encode_hello(hello)).map_err(io)?;
        Ok(stream)
    }

    /// Receives part `number` from `hello.from` to `hello.to` and answers with `mine`: returns
    /// the sender's call number and part.
    pub(super) fn receive(
        &self,
        hello: Hello,
        number: u64,
        mine: &[u8],
        timeout: Duration,
    ) -> Result<(u64, Vec<u8>), Failure> {
        let peer = format!("rank {}", hello.from);
        let doing = format!("receiving call {number} from {peer}");
        let deadline = Deadline::after(timeout);
        // The sender's connection, taken out while in use (as in `send`); the listener is
        // held only while polling, so that receives from other peers go on meanwhile.
        let mut stream = loop {
            let mut incoming = self.incoming.lock();
            if let Some(stream) = incoming.from.remove(&hello.from) {
                break stream;
            }
            if deadline.has_passed() {
                return Err(Failure::new(
                    Hccl::Timeout,
                    format!("{peer} did not send within {timeout:?} while {doing}"),
                ));
            }
            match incoming.listener.accept() {
                Ok((stream, _)) => {
                    if let Some((from, stream)) = admit(stream, hello, timeout) {
                        incoming.from.insert(from, stream);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drop(incoming);
                    sleep(POLL.min(deadline.left()));
                }
                Err(e) => return Err(Failure::io(&peer, &doing, &e)),
            }
        };
        let io = |e: io::Error| Failure::io(&peer, &doing, &e);
        stream
            .set_read_timeout(socket_wait(deadline.left()))
            .map_err(io)?;
        let part = wire::read_part(&mut stream, &peer, &doing)?;
        stream.set_read_timeout(socket_wait(timeout)).map_err(io)?;
        wire::write_part(&mut stream, number, mine).map_err(io)?;
        self.incoming.lock().from.insert(hello.from, stream);
        Ok(part)
    }
}

/// A connection accepted by rank `me.to`, kept when it introduces itself as a sender of the
/// same communicator to this rank; anything else is dropped.
fn admit(mut stream: TcpStream, me: Hello, timeout: Duration) -> Option<(u32, TcpStream)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_nodelay(true).ok()?;
    stream.set_read_timeout(Some(HELLO_WAIT)).ok()?;
    let mut bytes = [0u8; HELLO_BYTES];
    stream.read_exact(&mut bytes).ok()?;
    let hello = decode_hello(&bytes)?;
    if hello.id != me.id || !hello.secret.matches(&me.secret) || hello.to != me.to {
        tracing::debug!("a point-to-point connection that is not this rank's dropped");
        return None;
    }
    stream.set_read_timeout(socket_wait(timeout)).ok()?;
    stream.set_write_timeout(socket_wait(timeout)).ok()?;
    Some((hello.from, stream))
}
