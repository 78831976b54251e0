//! The host files through which processes of one node share (the simulator's memory and
//! events, the caching allocator's reference counters), created and opened so that no file
//! can crash a process that maps it.
//!
//! A shared map of a file faults (`SIGBUS`) where it reaches past the file's end, or where a
//! page is first written and the file system has no room for it. So a file is created with
//! its space reserved ([`create`]: `posix_fallocate`, a full directory is
//! [`IpcError::NoSpace`] at once), and a file is opened only when it is a regular file of at
//! least the length its reader maps ([`open`]: anything else is [`IpcError::BadFile`]), never
//! through a symbolic link. Whoever can write the directory (`/dev/shm` is writable by every
//! user) can leave any file under any name there; these checks make such a file a typed
//! refusal.
//!
//! What no check can prevent: the owner of a file cutting it short after another process
//! mapped it (only its owner may, in a sticky directory such as `/dev/shm`).
//!
//! Files are named `<prefix><pid>-<n>` by the process that made them ([`owner_pid`]): the
//! files of processes that ended ([`process_has_ended`]) are removed by [`sweep_ended`], and
//! their exports refused ([`IpcError::ExporterEnded`]).
//!
//! ```
//! use braid_stream_core::ipc::shared_files;
//! use braid_stream_core::hal::HalError;
//! use braid_stream_core::IpcError;
//!
//! let path = std::env::temp_dir().join(format!("braid-doc-{}", std::process::id()));
//! let file = shared_files::create(&path, 4096, "MY_DIR_VARIABLE").unwrap();
//! assert_eq!(file.metadata().unwrap().len(), 4096);
//! assert!(shared_files::open(&path, 4096).unwrap().is_some());
//! // Shorter than its reader maps: refused, never mapped.
//! let err = shared_files::open(&path, 8192).unwrap_err();
//! assert!(matches!(err, HalError::Ipc(e) if matches!(*e, IpcError::BadFile { .. })));
//! std::fs::remove_file(&path).unwrap();
//! assert!(shared_files::open(&path, 4096).unwrap().is_none());
//! ```

use super::IpcError;
use crate::hal::HalError;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::Path;

/// The typed refusal of `path`: `reason` says what is wrong with it.
pub fn bad_file(path: &Path, reason: impl Into<String>) -> HalError {
    HalError::Ipc(Box::new(IpcError::BadFile {
        path: path.display().to_string(),
        reason: reason.into(),
    }))
}

fn io_error(what: &str, path: &Path, e: &std::io::Error) -> HalError {
    HalError::InvalidArgument(format!("{what} {}: {e}", path.display()))
}

/// Creates `path`, which must not exist yet, as a file of `len` bytes whose space is reserved
/// on its file system, read and write for this process. A file system without room for it
/// (or over its quota) is [`IpcError::NoSpace`] naming the directory and `variable` (the
/// environment variable that names another directory); the file is removed then. Any other
/// failure is [`HalError::InvalidArgument`] naming the path and the system's reason.
pub fn create(path: &Path, len: u64, variable: &'static str) -> Result<File, HalError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io_error("cannot create", path, &e))?;
    if let Err(e) = reserve(&file, len) {
        let free = free_bytes(&file);
        let _ = std::fs::remove_file(path);
        return Err(match e.kind() {
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded => {
                HalError::Ipc(Box::new(IpcError::NoSpace {
                    dir: path
                        .parent()
                        .unwrap_or(Path::new("/"))
                        .display()
                        .to_string(),
                    variable,
                    needed: len,
                    free,
                }))
            }
            _ => io_error("cannot reserve the bytes of", path, &e),
        });
    }
    Ok(file)
}

/// Opens `path` for reading and writing, never through a symbolic link: the file and its
/// length, `None` when there is no such file. A file that is not a regular one, or that is
/// shorter than `min_len` (the bytes its reader maps), is [`IpcError::BadFile`].
pub fn open(path: &Path, min_len: u64) -> Result<Option<(File, u64)>, HalError> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if is_symlink(path) => {
            return Err(bad_file(path, format!("a symbolic link ({e})")));
        }
        Err(e) => return Err(io_error("cannot open", path, &e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| io_error("cannot read the length of", path, &e))?;
    if !meta.is_file() {
        return Err(bad_file(path, "not a regular file"));
    }
    if meta.len() < min_len {
        return Err(bad_file(
            path,
            format!(
                "{} bytes, fewer than the {min_len} it must hold",
                meta.len()
            ),
        ));
    }
    Ok(Some((file, meta.len())))
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether process `pid` of this host has ended: no process has that id (on Linux, no
/// `/proc/<pid>`), or it is a zombie its parent has not reaped yet. `false` where the
/// operating system does not tell (no `/proc`): only a process known to be gone has ended.
/// Processes that share through files must see each other's ids (one pid namespace).
pub fn process_has_ended(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return false;
    }
    match std::fs::read_to_string(proc.join(pid.to_string()).join("stat")) {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        // `pid (comm) S ...`: the state follows the last `)` (the command may hold one).
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| matches!(state, 'Z' | 'X')),
    }
}

/// The process id in a file name `<prefix><pid>-<n>` (the names braid gives its shared
/// files: the pid of the process that made the file); `None` for any other name.
pub fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    let (pid, n) = name.strip_prefix(prefix)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Removes the files of `dir` named `<prefix><pid>-<n>` whose process ([`owner_pid`]) has
/// ended: what exporters that crashed, or never closed their exports, left behind. Processes
/// that still map such a file keep it. Returns how many were removed.
pub fn sweep_ended(dir: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| owner_pid(n, prefix)) else {
            continue;
        };
        if pid != me && process_has_ended(pid) && std::fs::remove_file(entry.path()).is_ok() {
            tracing::debug!(file = %entry.path().display(), pid, "removed a shared file of an ended process");
            removed += 1;
        }
    }
    removed
}

/// Reserves the first `len` bytes of `file` on its file system (growing it to `len`), so
/// that writing them through a map never faults for want of room. Where the file system
/// cannot reserve (`EINVAL`, `EOPNOTSUPP`), the file is only sized.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(off) = libc::off_t::try_from(len) else {
        return Err(std::io::Error::from(ErrorKind::FileTooLarge));
    };
    if off == 0 {
        return Ok(());
    }
    // SAFETY: the descriptor is this open file's, alive for the call; posix_fallocate only
    // allocates the file's blocks and returns an error number (it does not set errno).
    match unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off) } {
        0 => Ok(()),
        code if code == libc::EINVAL || code == libc::EOPNOTSUPP => file.set_len(len),
        code => Err(std::io::Error::from_raw_os_error(code)),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
fn reserve(file: &File, len: u64) -> std::io::Result<()> {
    file.set_len(len)
}

/// Bytes free to this user on `file`'s file system (0 where that cannot be told).
#[cfg(unix)]
fn free_bytes(file: &File) -> u64 {
    use std::os::fd::AsRawFd;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: the descriptor is this open file's; fstatvfs writes the whole struct when it
    // returns 0, and only then is it read.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: written by the successful call above.
    let stat = unsafe { stat.assume_init() };
    // Narrower than u64 on some targets.
    #[allow(clippy::useless_conversion)]
    let (blocks, block) = (u64::from(stat.f_bavail), u64::from(stat.f_frsize));
    blocks.saturating_mul(block)
}

#[cfg(not(unix))]
fn free_bytes(_file: &File) -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("braid-shared-files-{}-{name}", std::process::id()))
    }

    fn is_bad_file(err: &HalError) -> bool {
        matches!(err, HalError::Ipc(e) if matches!(**e, IpcError::BadFile { .. }))
    }

    #[test]
    fn a_created_file_holds_its_bytes_and_is_never_an_existing_one() {
        let path = scratch("create");
        let file = create(&path, 1 << 20, "X").unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(meta.len(), 1 << 20);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // Reserved, not sparse: every block is there.
            assert!(meta.blocks() * 512 >= 1 << 20, "{} blocks", meta.blocks());
        }
        let err = create(&path, 16, "X").unwrap_err();
        assert!(err.to_string().contains("cannot create"), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn short_odd_and_linked_files_are_refused_typed() {
        let path = scratch("short");
        std::fs::write(&path, b"").unwrap();
        let err = open(&path, 64).unwrap_err();
        assert!(is_bad_file(&err), "{err:?}");
        assert!(
            err.to_string().contains("0 bytes, fewer than the 64"),
            "{err}"
        );
        std::fs::write(&path, [0u8; 64]).unwrap();
        assert_eq!(open(&path, 64).unwrap().unwrap().1, 64);

        let dir = scratch("a-directory");
        std::fs::create_dir_all(&dir).unwrap();
        let err = open(&dir, 0).unwrap_err();
        // Opening a directory for writing fails already; either way it is not mapped.
        assert!(
            is_bad_file(&err) || matches!(err, HalError::InvalidArgument(_)),
            "{err:?}"
        );
        std::fs::remove_dir(&dir).unwrap();

        #[cfg(unix)]
        {
            let link = scratch("link");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            let err = open(&link, 0).unwrap_err();
            assert!(is_bad_file(&err), "{err:?}");
            assert!(err.to_string().contains("symbolic link"), "{err}");
            std::fs::remove_file(&link).unwrap();
        }
        std::fs::remove_file(&path).unwrap();
        assert!(open(&path, 0).unwrap().is_none());
    }

    #[test]
    fn the_files_of_ended_processes_are_swept_and_no_others() {
        let dir = scratch("sweep");
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let names = [
            format!("p-{ended}-1"),
            format!("p-{ended}-2"),
            format!("p-{me}-1"),
            format!("q-{ended}-1"),
            format!("p-{ended}-x"),
        ];
        for name in &names {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let swept = sweep_ended(&dir, "p-");
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        if std::path::Path::new("/proc/self").exists() {
            assert_eq!(swept, 2);
            assert_eq!(left, names[2..].iter().cloned().collect());
        } else {
            assert_eq!(swept, 0);
        }
        assert_eq!(owner_pid("p-12-3", "p-"), Some(12));
        assert_eq!(owner_pid("p-12", "p-"), None);
        assert_eq!(owner_pid("p-12-3/4", "p-"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_has_ended_once_it_exited_even_before_it_is_reaped() {
        if !std::path::Path::new("/proc/self").exists() {
            eprintln!("note: no /proc here; no process is known to have ended");
            assert!(!process_has_ended(u32::MAX));
            return;
        }
        assert!(!process_has_ended(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited, not reaped yet: a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !process_has_ended(pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child.wait().unwrap();
        assert!(process_has_ended(pid));
    }
}
