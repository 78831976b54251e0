//! The files through which simulated devices of different processes share memory and events:
//! one file per export, in [`dir`], named by the export's key.
//!
//! A file starts with a [`HEADER`]-byte header; a memory file's bytes follow it. Header words
//! (little-endian, 8-byte aligned, updated with atomic operations since several processes map
//! the file):
//!
//! | offset | word | meaning |
//! |---|---|---|
//! | 0 | u64 | magic `BRAIDIPC` |
//! | 8 | u32 | kind: 1 memory, 2 event |
//! | 12 | u32 | state: 1 open, 2 closed by its exporter |
//! | 16 | u64 | bytes of memory (0 for an event) |
//! | 24 | u32 | exporter's process id |
//! | 28 | u32 | 1 when importers must be on the allow-list |
//! | 32 | u32 | open imports |
//! | 36 | u32 | processes on the allow-list |
//! | 40 | u64 | event: generations recorded |
//! | 48 | u64 | event: generations complete |
//! | 64.. | i32 × [`MAX_PIDS`] | the allow-list |
//!
//! Whoever can write the directory can put any file under a key's name, so a file is created
//! with its bytes reserved and opened only when it holds its header and the bytes its header
//! claims ([`braid_stream_core::ipc::shared_files`]); the size is read once, when it is
//! checked. A file of an exporter that ended is refused.

use crate::engine::invalid;
use braid_stream_core::hal::HalError;
use braid_stream_core::ipc::shared_files::{self, bad_file, process_has_ended};
use braid_stream_core::IpcError;
use memmap2::{MmapMut, MmapOptions};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes before a memory file's data: a multiple of every page size a host uses, so the data
/// maps on its own.
pub(crate) const HEADER: u64 = 64 << 10;
/// Processes an allow-list holds.
pub(crate) const MAX_PIDS: usize = 1024;
/// The environment variable naming the directory of the files (unset: `/dev/shm` where it is
/// a directory, else the temporary directory; set to nothing: refused).
pub const IPC_DIR_ENV: &str = "BRAID_SIM_IPC_DIR";
/// Every key starts with this.
pub(crate) const KEY_PREFIX: &str = "braid-sim-ipc-";

const MAGIC: u64 = u64::from_le_bytes(*b"BRAIDIPC");
const KIND: usize = 8;
const STATE: usize = 12;
const SIZE: usize = 16;
const EXPORTER: usize = 24;
const PID_CHECK: usize = 28;
const IMPORTS: usize = 32;
const PIDS_LEN: usize = 36;
const RECORDED: usize = 40;
const COMPLETED: usize = 48;
const PIDS: usize = 64;

/// What a file shares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Memory = 1,
    Event = 2,
}

const OPEN: u32 = 1;
const CLOSED: u32 = 2;

/// The directory of the files, by [`IPC_DIR_ENV`].
pub(crate) fn dir() -> Result<PathBuf, HalError> {
    match std::env::var_os(IPC_DIR_ENV) {
        Some(v) if v.is_empty() => Err(invalid(format!(
            "{IPC_DIR_ENV} is set to nothing: unset it (for /dev/shm) or name a directory"
        ))),
        Some(v) => Ok(PathBuf::from(v)),
        None => {
            let shm = PathBuf::from("/dev/shm");
            Ok(if shm.is_dir() {
                shm
            } else {
                std::env::temp_dir()
            })
        }
    }
}

/// Checks that `key` is one of the simulator's (a file name it made), so it cannot name
/// another path.
pub(crate) fn check_key(key: &str) -> Result<(), String> {
    let rest = key.strip_prefix(KEY_PREFIX).ok_or_else(|| {
        format!("{key:?} is not an IPC key of braid's simulator (they start with {KEY_PREFIX:?})")
    })?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        return Err(format!("{key:?} is not an IPC key of braid's simulator"));
    }
    Ok(())
}

/// One mapped header of a shared file.
pub(crate) struct SharedFile {
    key: String,
    path: PathBuf,
    file: File,
    header: MmapMut,
    /// Bytes of memory, checked against the file's length when it was created or opened (the
    /// header's word may change since: whoever can write the file can write it).
    size: u64,
    /// The exporter's process id, as read then.
    exporter: u32,
}

impl std::fmt::Debug for SharedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFile")
            .field("key", &self.key)
            .finish()
    }
}

fn io(what: &str, key: &str, e: std::io::Error) -> HalError {
    invalid(format!("{what} {key:?}: {e}"))
}

impl SharedFile {
    /// Creates the file of a new export `key` of `kind` with `size` bytes of memory, open,
    /// importers checked against its allow-list when `pid_check`.
    /// Its bytes are reserved in the directory: a directory without room for them is
    /// [`IpcError::NoSpace`].
    pub(crate) fn create(
        key: &str,
        kind: Kind,
        size: u64,
        pid_check: bool,
    ) -> Result<Self, HalError> {
        let path = dir()?.join(key);
        let len = HEADER
            .checked_add(size)
            .ok_or_else(|| invalid(format!("{size} bytes do not fit in a file")))?;
        let file = shared_files::create(&path, len, IPC_DIR_ENV)?;
        let me = std::process::id();
        let shared = match Self::map(key, path.clone(), file, size, me) {
            Ok(shared) => shared,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        shared.store64(SIZE, size);
        shared.store32(KIND, kind as u32);
        shared.store32(EXPORTER, me);
        shared.store32(PID_CHECK, u32::from(pid_check));
        shared.store32(STATE, OPEN);
        shared.store64(0, MAGIC);
        Ok(shared)
    }

    /// Opens the file of export `key`, which must be of `kind` and still open, by a process
    /// that still runs. A file that is not one of the simulator's, or holds fewer bytes than
    /// its header claims, is [`IpcError::BadFile`]; one whose exporter ended
    /// [`IpcError::ExporterEnded`].
    pub(crate) fn open(key: &str, kind: Kind) -> Result<Self, HalError> {
        check_key(key).map_err(invalid)?;
        let path = dir()?.join(key);
        let Some((file, len)) = shared_files::open(&path, HEADER)? else {
            return Err(invalid(format!(
                "no export has key {key:?} (never exported, closed by its exporter, or its process ended): ask the exporting process for a current key"
            )));
        };
        let mut shared = Self::map(key, path.clone(), file, 0, 0)?;
        if shared.load64(0) != MAGIC {
            return Err(bad_file(&path, "no header of braid's simulator"));
        }
        if shared.load32(KIND) != kind as u32 {
            return Err(invalid(format!(
                "{key:?} is not a {kind:?} export of braid's simulator"
            )));
        }
        let size = shared.load64(SIZE);
        if HEADER.checked_add(size).is_none_or(|need| need > len) {
            return Err(bad_file(
                &path,
                format!(
                    "its header claims {size} bytes of memory, the file holds {} after its header",
                    len - HEADER
                ),
            ));
        }
        if shared.load32(STATE) != OPEN {
            return Err(invalid(format!(
                "the export {key:?} was closed by its exporter: ask the exporting process for a current key"
            )));
        }
        let exporter = shared.load32(EXPORTER);
        if process_has_ended(exporter) {
            return Err(HalError::Ipc(Box::new(IpcError::ExporterEnded {
                key: key.to_string(),
                pid: exporter,
            })));
        }
        (shared.size, shared.exporter) = (size, exporter);
        Ok(shared)
    }

    /// Maps the header of `file`, which holds at least [`HEADER`] bytes (created so, or
    /// checked by [`shared_files::open`]).
    fn map(
        key: &str,
        path: PathBuf,
        file: File,
        size: u64,
        exporter: u32,
    ) -> Result<Self, HalError> {
        // SAFETY: the file is a regular file of at least `HEADER` bytes (reserved at its
        // creation, or its length checked when opened); other processes change its header only
        // through the atomic words below.
        let header = unsafe { MmapOptions::new().len(HEADER as usize).map_mut(&file) }
            .map_err(|e| io("cannot map the IPC file of", key, e))?;
        Ok(SharedFile {
            key: key.to_string(),
            path,
            file,
            header,
            size,
            exporter,
        })
    }

    /// A map of the file's memory bytes, shared with every other process mapping them.
    pub(crate) fn map_data(&self) -> Result<MmapMut, HalError> {
        let size = self.size;
        let len = usize::try_from(size).map_err(|_| invalid(format!("{size} bytes do not fit")))?;
        // SAFETY: the file holds `HEADER + size` bytes (reserved at its creation, or its length
        // checked against the header when opened); its data bytes are shared device memory
        // whose accesses the simulator orders like any device memory.
        unsafe {
            MmapOptions::new()
                .offset(HEADER)
                .len(len)
                .map_mut(&self.file)
        }
        .map_err(|e| io("cannot map the shared memory of", &self.key, e))
    }

    /// The key.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// Bytes of memory shared.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The exporter's process id.
    pub(crate) fn exporter(&self) -> u32 {
        self.exporter
    }

    /// Closes it (no new import) and removes its name; processes that mapped it keep it.
    ///
    /// With [`SharedFile::add_import`] and [`SharedFile::is_open`] (all sequentially
    /// consistent), a close and an import racing it agree: the closer sees the import in
    /// [`SharedFile::imports`] after closing, or the importer sees the close after counting
    /// itself in (and gives up).
    pub(crate) fn close(&self) {
        self.atomic32(STATE).store(CLOSED, Ordering::SeqCst);
        let _ = std::fs::remove_file(&self.path);
    }

    /// Whether its exporter has not closed it (see [`SharedFile::close`]).
    pub(crate) fn is_open(&self) -> bool {
        self.atomic32(STATE).load(Ordering::SeqCst) == OPEN
    }

    /// Adds `pids` to the allow-list.
    pub(crate) fn allow(&self, pids: &[i32]) -> Result<(), HalError> {
        let n = self.load32(PIDS_LEN) as usize;
        if n + pids.len() > MAX_PIDS {
            return Err(invalid(format!(
                "the allow-list of {:?} holds at most {MAX_PIDS} processes",
                self.key
            )));
        }
        for (i, pid) in pids.iter().enumerate() {
            self.store32(PIDS + 4 * (n + i), *pid as u32);
        }
        // Release: the pids are written before an importer can count them.
        self.atomic32(PIDS_LEN)
            .store((n + pids.len()) as u32, Ordering::Release);
        Ok(())
    }

    /// Whether process `pid` may import.
    pub(crate) fn allows(&self, pid: u32) -> bool {
        if self.load32(PID_CHECK) == 0 {
            return true;
        }
        let n = self.atomic32(PIDS_LEN).load(Ordering::Acquire) as usize;
        // Bounded: the count is another process's word.
        (0..n.min(MAX_PIDS)).any(|i| self.load32(PIDS + 4 * i) == pid)
    }

    /// Counts one more open import; returns the count.
    pub(crate) fn add_import(&self) -> u32 {
        self.atomic32(IMPORTS).fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Counts one import fewer.
    pub(crate) fn remove_import(&self) {
        let _ = self
            .atomic32(IMPORTS)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
    }

    /// Open imports.
    pub(crate) fn imports(&self) -> u32 {
        self.atomic32(IMPORTS).load(Ordering::SeqCst)
    }

    /// An event: one more generation recorded; returns it.
    pub(crate) fn record(&self) -> u64 {
        self.atomic64(RECORDED).fetch_add(1, Ordering::AcqRel) + 1
    }

    /// An event: the generations recorded so far.
    pub(crate) fn recorded(&self) -> u64 {
        self.atomic64(RECORDED).load(Ordering::Acquire)
    }

    /// An event: generation `g` is complete (its work and data effects are done).
    pub(crate) fn complete(&self, g: u64) {
        self.atomic64(COMPLETED).fetch_max(g, Ordering::AcqRel);
    }

    /// An event: the generations complete so far.
    pub(crate) fn completed(&self) -> u64 {
        self.atomic64(COMPLETED).load(Ordering::Acquire)
    }

    fn atomic32(&self, at: usize) -> &AtomicU32 {
        let ptr = self.header[at..at + 4].as_ptr().cast::<u32>().cast_mut();
        // SAFETY: `at` is 4-byte aligned inside the page-aligned map, which lives as long as
        // `self`; every process accesses the word atomically.
        unsafe { AtomicU32::from_ptr(ptr) }
    }

    fn atomic64(&self, at: usize) -> &AtomicU64 {
        let ptr = self.header[at..at + 8].as_ptr().cast::<u64>().cast_mut();
        // SAFETY: `at` is 8-byte aligned inside the page-aligned map, which lives as long as
        // `self`; every process accesses the word atomically.
        unsafe { AtomicU64::from_ptr(ptr) }
    }

    fn load32(&self, at: usize) -> u32 {
        self.atomic32(at).load(Ordering::Acquire)
    }

    fn store32(&self, at: usize, v: u32) {
        self.atomic32(at).store(v, Ordering::Release);
    }

    fn load64(&self, at: usize) -> u64 {
        self.atomic64(at).load(Ordering::Acquire)
    }

    fn store64(&self, at: usize, v: u64) {
        self.atomic64(at).store(v, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> String {
        format!("{KEY_PREFIX}{}-9000{n}", std::process::id())
    }

    #[test]
    fn a_file_shares_its_words_and_bytes_between_maps() {
        let k = key(1);
        let a = SharedFile::create(&k, Kind::Memory, 4096, true).unwrap();
        let b = SharedFile::open(&k, Kind::Memory).unwrap();
        assert_eq!(b.size(), 4096);
        assert!(!b.allows(4242));
        a.allow(&[4242]).unwrap();
        assert!(b.allows(4242) && !b.allows(1));
        let (mut da, db) = (a.map_data().unwrap(), b.map_data().unwrap());
        da[100] = 7;
        assert_eq!(db[100], 7);
        assert_eq!(b.add_import(), 1);
        assert_eq!(a.imports(), 1);
        a.close();
        assert!(!b.is_open());
        let err = SharedFile::open(&k, Kind::Memory).unwrap_err();
        assert!(err.to_string().contains("no export has key"), "{err}");
        assert!(SharedFile::open("../etc/passwd", Kind::Memory).is_err());
        assert!(check_key(&format!("{KEY_PREFIX}1-2")).is_ok());
        assert!(check_key(&format!("{KEY_PREFIX}1/2")).is_err());
    }

    #[test]
    fn event_generations_count_up() {
        let k = key(2);
        let a = SharedFile::create(&k, Kind::Event, 0, false).unwrap();
        let b = SharedFile::open(&k, Kind::Event).unwrap();
        assert!(SharedFile::open(&k, Kind::Memory).is_err());
        assert_eq!(a.record(), 1);
        assert_eq!(b.recorded(), 1);
        assert_eq!(b.completed(), 0);
        a.complete(1);
        assert_eq!(b.completed(), 1);
        a.close();
    }
}
