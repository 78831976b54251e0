//! Sharing memory and events with other processes, as CUDA IPC and ACL's
//! `aclrtIpcMem*` / `aclrtIpcGetEventHandle` / shareable virtual-memory handles do, between
//! simulated devices of different processes (or of one process).
//!
//! The simulated devices of two processes share no clock and no engine, so what they share
//! goes through files (module `file`) in one directory (`/dev/shm` unless
//! [`BRAID_SIM_IPC_DIR`](self::file::IPC_DIR_ENV) names another), one per export, named by its key
//! (`braid-sim-ipc-<pid>-<n>`):
//!
//! - **Memory**: exporting a range of an allocation moves its bytes into the file and maps the
//!   file there (the exporter's addresses do not change); an importer maps the same file as a
//!   new allocation of its device. Both processes then read and write the same bytes, with
//!   the data effects of each one's work applied when its host clock passes them, as always.
//!   Physical memory of the virtual-memory API is shared the same way, by shareable handle
//!   (the file follows the handle wherever it is mapped).
//! - **Events**: a record of an exported event counts a generation in the file; the
//!   generation is published complete once the exporter's host clock has passed the record's
//!   completion time (its work done and its data written). A stream of another process that
//!   waits on the opened event blocks its host, in real time, until the generation recorded
//!   at the wait is published; a query compares the two, a synchronize blocks likewise.
//!
//! Rules (CANN's, for `braid-acl-sim`): a key is closed by its exporter (no new imports; the
//! importers keep their mapping) and by each importer (unmapping it); importers may be
//! checked against an allow-list of process ids; a process does not import its own export.
//!
//! Files cannot crash a process: a file's bytes are reserved when it is created (a directory
//! without room is `IpcError::NoSpace`, naming it and [`BRAID_SIM_IPC_DIR`](self::file::IPC_DIR_ENV)), and
//! a file is mapped only when it holds its header and the bytes its header claims (else
//! `IpcError::BadFile`), so a file planted in `/dev/shm` is refused, never mapped.
//!
//! A process that ended takes what it shared with it, as on a device: an import of its
//! memory or event is `IpcError::ExporterEnded`, and so is a wait on (or a query of) its
//! event whose last record it never published. Its files are removed by the first export of
//! each later process.
//!
//! Limits: the exporter's device advances only with its host, so an importer waiting on an
//! event waits until the exporter's process makes a call that passes the record (a
//! synchronize, a query that finds it complete, any later call whose host time passes it).
//! **The wait blocks the importer's host thread**, in real time, bounded by
//! [`SimConfig::ipc_timeout`](crate::SimConfig). Timing-only devices store nothing, so keys
//! and events work but no bytes move. The sanitizer of each process sees only its own
//! accesses. Processes that share must see each other's process ids (one pid namespace).

pub(crate) mod file;

pub use file::IPC_DIR_ENV;

use braid_stream_core::hal::HalError;
use braid_stream_core::ipc::shared_files::{self, process_has_ended};
use braid_stream_core::IpcError;
use file::{Kind, SharedFile, KEY_PREFIX};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

/// Bytes of an IPC event handle (ACL's `ACL_IPC_EVENT_HANDLE_SIZE`).
pub const IPC_EVENT_HANDLE_BYTES: usize = 64;

/// A fresh key of this process.
pub(crate) fn new_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    static SWEEP: Once = Once::new();
    SWEEP.call_once(sweep_stale);
    format!(
        "{KEY_PREFIX}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The key of shareable handle `shareable` (the exporter's pid and number).
pub(crate) fn key_of_shareable(shareable: u64) -> String {
    format!(
        "{KEY_PREFIX}{}-{}",
        shareable >> 32,
        shareable & 0xffff_ffff
    )
}

/// The shareable handle of `key` (one this process made).
pub(crate) fn shareable_of_key(key: &str) -> Option<u64> {
    let rest = key.strip_prefix(KEY_PREFIX)?;
    let (pid, n) = rest.split_once('-')?;
    let (pid, n): (u64, u64) = (pid.parse().ok()?, n.parse().ok()?);
    (pid <= u64::from(u32::MAX) && n <= u64::from(u32::MAX)).then_some(pid << 32 | n)
}

/// A handle's bytes: the key, NUL-padded.
pub(crate) fn handle_of_key(key: &str) -> [u8; IPC_EVENT_HANDLE_BYTES] {
    let mut out = [0u8; IPC_EVENT_HANDLE_BYTES];
    let n = key.len().min(IPC_EVENT_HANDLE_BYTES - 1);
    out[..n].copy_from_slice(&key.as_bytes()[..n]);
    out
}

/// The key in a handle's bytes.
pub(crate) fn key_of_handle(handle: &[u8; IPC_EVENT_HANDLE_BYTES]) -> Result<String, String> {
    let end = handle.iter().position(|&b| b == 0).unwrap_or(handle.len());
    let key = std::str::from_utf8(&handle[..end])
        .map_err(|_| "the IPC event handle holds no key of braid's simulator".to_string())?;
    file::check_key(key)?;
    Ok(key.to_string())
}

/// Removes the files of processes that ended (their exporter's pid is gone).
fn sweep_stale() {
    if let Ok(dir) = file::dir() {
        shared_files::sweep_ended(&dir, KEY_PREFIX);
    }
}

/// A host wait for the record of another process's event a call saw last.
pub(crate) struct IpcWait {
    file: Arc<SharedFile>,
    generation: u64,
    timeout: std::time::Duration,
}

impl IpcWait {
    /// The wait for event `e` of the device behind `shared`, when it is opened from another
    /// process (else `None`): for the generation recorded now.
    pub(crate) fn of(shared: &crate::device::Shared, e: usize) -> Result<Option<Self>, HalError> {
        let mut engine = crate::device::lock_engine(shared);
        let Some(file) = engine.ipc_opened(e) else {
            return Ok(None);
        };
        engine.host_call("ipc_event_wait");
        Ok(Some(IpcWait {
            generation: file.recorded(),
            timeout: engine.ipc_timeout(),
            file,
        }))
    }

    /// Blocks (in real time, no engine lock held) until the generation is published; fails
    /// at once with [`IpcError::ExporterEnded`] when the exporter has ended without
    /// publishing it, and with ACL's 507047 after the timeout.
    pub(crate) fn block(self) -> Result<(), HalError> {
        let deadline = braid_stream_core::deadline::Deadline::after(self.timeout);
        let mut pause = std::time::Duration::from_micros(50);
        while self.file.completed() < self.generation {
            // Its last publication may have come just before it ended: checked again first.
            if process_has_ended(self.file.exporter()) && self.file.completed() < self.generation {
                return Err(exporter_ended(&self.file));
            }
            if deadline.has_passed() {
                return Err(HalError::Native {
                    code: 507_047,
                    name: "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
                    message: format!(
                        "the record {} of IPC event {} (process {}) was not published within {:?}: the exporting process must pass it (synchronize the event, or keep making calls)",
                        self.generation,
                        self.file.key(),
                        self.file.exporter(),
                        self.timeout
                    ),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
        Ok(())
    }
}

/// The refusal of `file`, whose exporter has ended.
pub(crate) fn exporter_ended(file: &SharedFile) -> HalError {
    HalError::Ipc(Box::new(IpcError::ExporterEnded {
        key: file.key().to_string(),
        pid: file.exporter(),
    }))
}

/// Whether the record the opened event `file` last counted is published; an exporter that
/// ended without publishing it is [`IpcError::ExporterEnded`] (it never will be).
pub(crate) fn opened_event_done(file: &SharedFile) -> Result<bool, HalError> {
    let recorded = file.recorded();
    if file.completed() >= recorded {
        return Ok(true);
    }
    if process_has_ended(file.exporter()) && file.completed() < recorded {
        return Err(exporter_ended(file));
    }
    Ok(false)
}

/// Memory this process exported.
#[derive(Debug)]
pub(crate) struct MemExport {
    /// Device index in the node.
    pub device: usize,
    /// Base of the allocation the range is in.
    pub base: u64,
    /// The range's offset in the allocation.
    pub offset: u64,
    /// The range's bytes.
    pub len: u64,
    pub file: Arc<SharedFile>,
}

impl MemExport {
    /// Whether it shares bytes of `[offset, offset + len)` of allocation `base` of `device`.
    pub(crate) fn overlaps(&self, device: usize, base: u64, offset: u64, len: u64) -> bool {
        self.device == device
            && self.base == base
            && self.offset < offset + len
            && offset < self.offset + self.len
    }
}

/// Memory this process imported.
#[derive(Debug)]
pub(crate) struct MemImport {
    pub device: usize,
    /// The imported allocation.
    pub ptr: u64,
    pub file: Arc<SharedFile>,
}

/// An event this process exported: its file and the records not yet published complete, as
/// (generation, completion time).
#[derive(Debug)]
pub(crate) struct EventExport {
    pub file: Arc<SharedFile>,
    pub pending: VecDeque<(u64, u64)>,
}

/// Physical memory shared by handle: the exporter's or an importer's.
#[derive(Debug)]
pub(crate) struct PhysicalShare {
    pub device: usize,
    pub file: Arc<SharedFile>,
    /// Whether this process exported it (else imported it).
    pub exported: bool,
}

/// Everything one engine shares.
#[derive(Debug, Default)]
pub(crate) struct IpcState {
    /// Open exports of memory, by key.
    pub exports: BTreeMap<String, MemExport>,
    /// Closed exports whose bytes still live in their file (the processes that imported them
    /// share them), until their allocation goes or their range is shared anew.
    pub closed: Vec<MemExport>,
    pub imports: BTreeMap<String, MemImport>,
    /// Exported events by event index.
    pub events_out: BTreeMap<usize, EventExport>,
    /// Opened events by event index.
    pub events_in: BTreeMap<usize, Arc<SharedFile>>,
    /// Shared physical memory by (device index, simulator handle).
    pub physical: BTreeMap<(usize, u64), PhysicalShare>,
}

impl IpcState {
    /// Creates the file of a new export.
    pub(crate) fn create(
        kind: Kind,
        size: u64,
        pid_check: bool,
    ) -> Result<Arc<SharedFile>, HalError> {
        SharedFile::create(&new_key(), kind, size, pid_check).map(Arc::new)
    }

    /// Whether `key` is an export of this process (of any kind).
    pub(crate) fn exported_here(&self, key: &str) -> bool {
        self.exports.contains_key(key)
            || self.events_out.values().any(|e| e.file.key() == key)
            || self
                .physical
                .values()
                .any(|p| p.exported && p.file.key() == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_handles_and_shareable_numbers_round_trip() {
        let key = new_key();
        assert!(file::check_key(&key).is_ok());
        let shareable = shareable_of_key(&key).unwrap();
        assert_eq!(key_of_shareable(shareable), key);
        assert_eq!(key_of_handle(&handle_of_key(&key)).unwrap(), key);
        assert!(key_of_handle(&[0xff; IPC_EVENT_HANDLE_BYTES]).is_err());
        assert!(key_of_handle(&handle_of_key("/etc/passwd")).is_err());
    }
}
