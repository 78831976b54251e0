//! What [`super::RemoteGroup`] puts in a root info and on its sockets, and the HCCL error
//! codes it answers with.
//!
//! Root info (4,108 bytes, little-endian): `BRDSIMRI`, version `u32`, communicator id `u64`,
//! address family `u8` (4 or 6), port `u16`, 16 address bytes (IPv4 in the first 4), a 16-byte
//! random secret, zeros. The id names the communicator (errors show it); only the secret
//! proves that a peer was given the root info, and nothing ever shows it.
//!
//! Frames on a connection between rank 0 and another rank, each starting with an 8-byte magic:
//! - join (rank → rank 0): `BRDSIMJN`, communicator id `u64`, secret (16 bytes), ranks `u32`,
//!   rank `u32`;
//! - status (rank 0 → rank): `BRDSIMST`, HCCL code `u32` (0: success), message length `u32`,
//!   UTF-8 message;
//! - confirm (rank → rank 0): `BRDSIMCF`, alone;
//! - part (rank → rank 0): `BRDSIMEX`, call `u64`, length `u64`, bytes;
//! - gathered (rank 0 → rank, after a success status): `BRDSIMGA`, count `u32`, then per rank
//!   a length `u64` and the bytes.
//!
//! A join: the rank sends its join frame; rank 0 answers a refusal (a failure status) at once,
//! or a success status once every rank is in; the rank confirms; rank 0 then answers every
//! rank with one last status: success, or the failure that ended the rendezvous.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use braid_stream_core::collective::{RootInfo, ROOT_INFO_BYTES};
use braid_stream_core::hal::HalError;

pub(super) const ROOT_INFO_MAGIC: [u8; 8] = *b"BRDSIMRI";
pub(super) const ROOT_INFO_VERSION: u32 = 2;
pub(super) const JOIN_MAGIC: [u8; 8] = *b"BRDSIMJN";
/// The bytes of a join frame.
pub(super) const JOIN_BYTES: usize = 40;
pub(super) const STATUS_MAGIC: [u8; 8] = *b"BRDSIMST";
pub(super) const CONFIRM_MAGIC: [u8; 8] = *b"BRDSIMCF";
pub(super) const PART_MAGIC: [u8; 8] = *b"BRDSIMEX";
pub(super) const GATHERED_MAGIC: [u8; 8] = *b"BRDSIMGA";
/// The largest part one rank may contribute to an exchange (16 GiB): a length beyond it is a
/// broken stream, not an allocation to attempt.
const MAX_PART_BYTES: u64 = 1 << 34;

/// The HCCL result codes the simulator's transport answers with (`HcclResult`,
/// `reference/aclnn-hccl.md` B.1).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Hccl {
    /// `HCCL_E_PARA`: a bad parameter (surfaces as [`HalError::InvalidArgument`]).
    Para = 1,
    /// `HCCL_E_INTERNAL`.
    Internal = 4,
    /// `HCCL_E_TIMEOUT`.
    Timeout = 9,
    /// `HCCL_E_TCP_CONNECT`.
    TcpConnect = 11,
    /// `HCCL_E_TCP_TRANSFER`.
    TcpTransfer = 13,
}

impl Hccl {
    fn from_code(code: u32) -> Hccl {
        match code {
            1 => Hccl::Para,
            9 => Hccl::Timeout,
            11 => Hccl::TcpConnect,
            13 => Hccl::TcpTransfer,
            _ => Hccl::Internal,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Hccl::Para => "HCCL_E_PARA",
            Hccl::Internal => "HCCL_E_INTERNAL",
            Hccl::Timeout => "HCCL_E_TIMEOUT",
            Hccl::TcpConnect => "HCCL_E_TCP_CONNECT",
            Hccl::TcpTransfer => "HCCL_E_TCP_TRANSFER",
        }
    }

    /// The error a caller sees.
    pub(super) fn error(self, message: String) -> HalError {
        match self {
            Hccl::Para => HalError::InvalidArgument(message),
            _ => HalError::Native {
                code: self as i32,
                name: self.name(),
                message,
            },
        }
    }
}

/// A failure to send to rank 0 or to hear from it, as the caller sees it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct Failure {
    pub(super) code: Hccl,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn new(code: Hccl, message: String) -> Failure {
        Failure { code, message }
    }

    /// A socket error while talking to `peer`: a timeout or a broken connection.
    pub(super) fn io(peer: &str, doing: &str, error: &io::Error) -> Failure {
        match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Failure::new(
                Hccl::Timeout,
                format!("{peer} did not answer in time while {doing}"),
            ),
            io::ErrorKind::UnexpectedEof => Failure::new(
                Hccl::TcpTransfer,
                format!("{peer} closed the connection while {doing}"),
            ),
            _ => Failure::new(
                Hccl::TcpTransfer,
                format!("{doing} with {peer} failed: {error}"),
            ),
        }
    }

    pub(super) fn into_error(self) -> HalError {
        self.code.error(self.message)
    }
}

/// A communicator's secret: what only the holders of its root info know.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Secret(pub(super) [u8; 16]);

impl Secret {
    /// Compares in a time that does not depend on where the secrets differ.
    pub(super) fn matches(&self, other: &Secret) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .fold(0, |differ, (a, b)| differ | (a ^ b))
            == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// What a root info of the simulator holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct RootInfoContent {
    pub(super) id: u64,
    pub(super) addr: SocketAddr,
    pub(super) secret: Secret,
}

pub(super) fn encode_root_info(content: RootInfoContent) -> RootInfo {
    let mut bytes = [0u8; ROOT_INFO_BYTES];
    bytes[..8].copy_from_slice(&ROOT_INFO_MAGIC);
    bytes[8..12].copy_from_slice(&ROOT_INFO_VERSION.to_le_bytes());
    bytes[12..20].copy_from_slice(&content.id.to_le_bytes());
    let (family, ip): (u8, [u8; 16]) = match content.addr.ip() {
        IpAddr::V4(v4) => {
            let mut ip = [0u8; 16];
            ip[..4].copy_from_slice(&v4.octets());
            (4, ip)
        }
        IpAddr::V6(v6) => (6, v6.octets()),
    };
    bytes[20] = family;
    bytes[21..23].copy_from_slice(&content.addr.port().to_le_bytes());
    bytes[23..39].copy_from_slice(&ip);
    bytes[39..55].copy_from_slice(&content.secret.0);
    RootInfo(Box::new(bytes))
}

/// The content of `info`, or an invalid argument saying why it is not a root info of the
/// simulator.
pub(super) fn decode_root_info(info: &RootInfo) -> Result<RootInfoContent, HalError> {
    let bytes = info.as_bytes();
    let not_one = |why: String| {
        HalError::InvalidArgument(format!(
            "not a root info from the simulator's HcclGetRootInfo: {why}"
        ))
    };
    if bytes[..8] != ROOT_INFO_MAGIC {
        return Err(not_one(format!(
            "it starts with {:02x?}, not {:02x?}",
            &bytes[..8],
            ROOT_INFO_MAGIC
        )));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != ROOT_INFO_VERSION {
        return Err(not_one(format!(
            "version {version}, this simulator reads version {ROOT_INFO_VERSION}"
        )));
    }
    let id = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let port = u16::from_le_bytes([bytes[21], bytes[22]]);
    let ip: [u8; 16] = bytes[23..39].try_into().expect("16 bytes");
    let ip = match bytes[20] {
        4 => IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
        6 => IpAddr::V6(Ipv6Addr::from(ip)),
        family => return Err(not_one(format!("address family {family}"))),
    };
    if bytes[55..].iter().any(|&b| b != 0) {
        return Err(not_one("bytes after the secret are not zero".to_owned()));
    }
    Ok(RootInfoContent {
        id,
        addr: SocketAddr::new(ip, port),
        secret: Secret(bytes[39..55].try_into().expect("16 bytes")),
    })
}

/// A join request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Join {
    pub(super) id: u64,
    pub(super) secret: Secret,
    pub(super) ranks: u32,
    pub(super) rank: u32,
}

pub(super) fn write_join(stream: &mut impl Write, join: Join) -> io::Result<()> {
    let mut frame = JOIN_MAGIC.to_vec();
    frame.extend_from_slice(&join.id.to_le_bytes());
    frame.extend_from_slice(&join.secret.0);
    frame.extend_from_slice(&join.ranks.to_le_bytes());
    frame.extend_from_slice(&join.rank.to_le_bytes());
    stream.write_all(&frame)
}

/// The join request in `frame`, or `None` when the connection sent something else.
pub(super) fn parse_join(frame: &[u8; JOIN_BYTES]) -> Option<Join> {
    if frame[..8] != JOIN_MAGIC {
        return None;
    }
    Some(Join {
        id: u64::from_le_bytes(frame[8..16].try_into().expect("8 bytes")),
        secret: Secret(frame[16..32].try_into().expect("16 bytes")),
        ranks: u32::from_le_bytes(frame[32..36].try_into().expect("4 bytes")),
        rank: u32::from_le_bytes(frame[36..40].try_into().expect("4 bytes")),
    })
}

/// A rank's confirmation that it heard every rank is in.
pub(super) fn write_confirm(stream: &mut impl Write) -> io::Result<()> {
    stream.write_all(&CONFIRM_MAGIC)
}

/// A rank's confirmation; a failure naming `peer` when it left or sent something else.
pub(super) fn read_confirm(stream: &mut impl Read, peer: &str, doing: &str) -> Result<(), Failure> {
    let mut frame = [0u8; 8];
    stream
        .read_exact(&mut frame)
        .map_err(|e| Failure::io(peer, doing, &e))?;
    if frame != CONFIRM_MAGIC {
        return Err(garbled(peer, doing));
    }
    Ok(())
}

/// Sends a success (`None`) or a failure.
pub(super) fn write_status(stream: &mut impl Write, failure: Option<&Failure>) -> io::Result<()> {
    let (code, message) = failure.map_or((0, ""), |f| (f.code as u32, f.message.as_str()));
    let mut frame = STATUS_MAGIC.to_vec();
    frame.extend_from_slice(&code.to_le_bytes());
    frame.extend_from_slice(&(message.len() as u32).to_le_bytes());
    frame.extend_from_slice(message.as_bytes());
    stream.write_all(&frame)
}

/// Rank 0's status: `Ok(())` on success, `Err` with its failure otherwise; an I/O error or
/// a frame that is not a status is a failure of the connection.
pub(super) fn read_status(stream: &mut impl Read, doing: &str) -> Result<(), Failure> {
    let io = |e: io::Error| Failure::io("rank 0", doing, &e);
    let mut header = [0u8; 16];
    stream.read_exact(&mut header).map_err(io)?;
    if header[..8] != STATUS_MAGIC {
        return Err(garbled("rank 0", doing));
    }
    let code = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    let length = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
    let mut message = vec![0u8; length as usize];
    stream.read_exact(&mut message).map_err(io)?;
    if code == 0 {
        return Ok(());
    }
    Err(Failure::new(
        Hccl::from_code(code),
        String::from_utf8_lossy(&message).into_owned(),
    ))
}

fn garbled(peer: &str, doing: &str) -> Failure {
    Failure::new(
        Hccl::TcpTransfer,
        format!("{peer} sent a garbled frame while {doing}"),
    )
}

pub(super) fn write_part(stream: &mut impl Write, call: u64, part: &[u8]) -> io::Result<()> {
    let mut header = PART_MAGIC.to_vec();
    header.extend_from_slice(&call.to_le_bytes());
    header.extend_from_slice(&(part.len() as u64).to_le_bytes());
    stream.write_all(&header)?;
    stream.write_all(part)
}

/// A rank's part of an exchange and the call it belongs to.
pub(super) fn read_part(
    stream: &mut impl Read,
    peer: &str,
    doing: &str,
) -> Result<(u64, Vec<u8>), Failure> {
    let io = |e: io::Error| Failure::io(peer, doing, &e);
    let mut header = [0u8; 24];
    stream.read_exact(&mut header).map_err(io)?;
    if header[..8] != PART_MAGIC {
        return Err(garbled(peer, doing));
    }
    let call = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let part = read_bytes(stream, &header[16..24], peer, doing)?;
    Ok((call, part))
}

pub(super) fn write_gathered(stream: &mut impl Write, parts: &[Vec<u8>]) -> io::Result<()> {
    let mut header = GATHERED_MAGIC.to_vec();
    header.extend_from_slice(&(parts.len() as u32).to_le_bytes());
    stream.write_all(&header)?;
    for part in parts {
        stream.write_all(&(part.len() as u64).to_le_bytes())?;
        stream.write_all(part)?;
    }
    Ok(())
}

/// Every rank's part, from rank 0; `ranks` of them.
pub(super) fn read_gathered(
    stream: &mut impl Read,
    ranks: u32,
    doing: &str,
) -> Result<Vec<Vec<u8>>, Failure> {
    let io = |e: io::Error| Failure::io("rank 0", doing, &e);
    let mut header = [0u8; 12];
    stream.read_exact(&mut header).map_err(io)?;
    let count = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if header[..8] != GATHERED_MAGIC || count != ranks {
        return Err(garbled("rank 0", doing));
    }
    (0..count)
        .map(|_| {
            let mut length = [0u8; 8];
            stream.read_exact(&mut length).map_err(io)?;
            read_bytes(stream, &length, "rank 0", doing)
        })
        .collect()
}

/// `length` (a little-endian `u64`) bytes from `stream`.
fn read_bytes(
    stream: &mut impl Read,
    length: &[u8],
    peer: &str,
    doing: &str,
) -> Result<Vec<u8>, Failure> {
    let length = u64::from_le_bytes(length.try_into().expect("8 bytes"));
    if length > MAX_PART_BYTES {
        return Err(garbled(peer, doing));
    }
    let mut bytes = vec![0u8; length as usize];
    stream
        .read_exact(&mut bytes)
        .map_err(|e| Failure::io(peer, doing, &e))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_info_content_round_trips_for_both_address_families() {
        for addr in ["127.0.0.1:4242", "[::1]:65535"] {
            let content = RootInfoContent {
                id: 0x0123_4567_89ab_cdef,
                addr: addr.parse().unwrap(),
                secret: Secret([0xC3; 16]),
            };
            let info = encode_root_info(content);
            assert_eq!(info.as_bytes().len(), ROOT_INFO_BYTES);
            assert_eq!(decode_root_info(&info).unwrap(), content);
        }
    }

    fn refusal(bytes: &[u8]) -> String {
        match decode_root_info(&RootInfo::from_bytes(bytes).unwrap()) {
            Err(HalError::InvalidArgument(why)) => why,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn bytes_that_are_not_a_root_info_are_invalid_arguments_saying_why() {
        let good = encode_root_info(RootInfoContent {
            id: 1,
            addr: "127.0.0.1:1".parse().unwrap(),
            secret: Secret([1; 16]),
        });
        let why = refusal(&[0u8; ROOT_INFO_BYTES]);
        assert!(why.contains("not a root info"), "{why}");
        let mut bytes = good.as_bytes().to_vec();
        // A root info of the first version, which had no secret.
        bytes[8] = 1;
        assert!(refusal(&bytes).contains("version 1"));
        let mut bytes = good.as_bytes().to_vec();
        bytes[20] = 5;
        assert!(refusal(&bytes).contains("address family 5"));
        let mut bytes = good.as_bytes().to_vec();
        bytes[ROOT_INFO_BYTES - 1] = 1;
        assert!(refusal(&bytes).contains("not zero"));
    }

    #[test]
    fn frames_round_trip() {
        let mut wire = Vec::new();
        let join = Join {
            id: 7,
            secret: Secret([9; 16]),
            ranks: 4,
            rank: 3,
        };
        write_join(&mut wire, join).unwrap();
        write_confirm(&mut wire).unwrap();
        let failure = Failure::new(Hccl::Timeout, "late".to_owned());
        write_status(&mut wire, Some(&failure)).unwrap();
        write_status(&mut wire, None).unwrap();
        write_part(&mut wire, 9, b"abc").unwrap();
        let parts = vec![b"x".to_vec(), Vec::new(), b"yz".to_vec()];
        write_gathered(&mut wire, &parts).unwrap();
        let frame: [u8; JOIN_BYTES] = wire[..JOIN_BYTES].try_into().unwrap();
        assert_eq!(parse_join(&frame), Some(join));
        let mut r = &wire[JOIN_BYTES..];
        assert_eq!(read_confirm(&mut r, "rank 3", "testing"), Ok(()));
        assert_eq!(read_status(&mut r, "testing"), Err(failure));
        assert_eq!(read_status(&mut r, "testing"), Ok(()));
        assert_eq!(
            read_part(&mut r, "rank 1", "testing").unwrap(),
            (9, b"abc".to_vec())
        );
        assert_eq!(read_gathered(&mut r, 3, "testing").unwrap(), parts);
        assert!(r.is_empty());
    }

    #[test]
    fn garbled_and_cut_frames_are_transfer_failures() {
        assert_eq!(parse_join(&[b'x'; JOIN_BYTES]), None);
        let failure = read_confirm(&mut &b"BRDSIMST"[..], "rank 1", "joining").unwrap_err();
        assert!(failure.message.contains("rank 1 sent a garbled frame"));
        let failure = read_status(&mut &b"BRDSIMST\0\0"[..], "joining").unwrap_err();
        assert_eq!(failure.code, Hccl::TcpTransfer);
        assert!(failure
            .message
            .contains("closed the connection while joining"));
        let mut wire = Vec::new();
        write_part(&mut wire, 1, b"abc").unwrap();
        wire[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        let failure = read_part(&mut wire.as_slice(), "rank 2", "exchanging").unwrap_err();
        assert!(failure.message.contains("rank 2 sent a garbled frame"));
        let mut wire = Vec::new();
        write_gathered(&mut wire, &[Vec::new(), Vec::new()]).unwrap();
        let failure = read_gathered(&mut wire.as_slice(), 3, "exchanging").unwrap_err();
        assert_eq!(failure.code, Hccl::TcpTransfer);
    }

    #[test]
    fn secrets_match_only_themselves_and_never_show() {
        let secret = Secret([7; 16]);
        assert!(secret.matches(&Secret([7; 16])));
        let mut other = [7; 16];
        other[15] = 8;
        assert!(!secret.matches(&Secret(other)));
        assert_eq!(format!("{secret:?}"), "Secret(..)");
    }

    #[test]
    fn failures_become_hal_errors_with_hccl_names() {
        let err = Failure::new(Hccl::Timeout, "late".to_owned()).into_error();
        assert_eq!(
            err,
            HalError::Native {
                code: 9,
                name: "HCCL_E_TIMEOUT",
                message: "late".to_owned()
            }
        );
        let err = Failure::new(Hccl::Para, "bad".to_owned()).into_error();
        assert_eq!(err, HalError::InvalidArgument("bad".to_owned()));
        assert_eq!(Hccl::from_code(99), Hccl::Internal);
        assert_eq!(Hccl::from_code(Hccl::TcpConnect as u32), Hccl::TcpConnect);
    }
}
