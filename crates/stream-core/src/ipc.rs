//! Sharing device memory and events between processes of one node, as torch_npu does over
//! ACL's `aclrtIpcMem*` and `aclrtIpc*EventHandle` (CUDA's `cudaIpc*`).
//!
//! The exporting process shares a range of its device memory under a key
//! ([`Device::ipc_export`]), lets processes import it ([`Device::ipc_allow_pids`], unless it
//! exported to any process), and sends the key to them by any means (a pipe, a file, a
//! socket: [`IpcMemKey`] is a short string). An importer maps the memory
//! ([`Device::ipc_import`], an [`IpcMemory`] that closes the import when dropped) and works on
//! it like its own. Work is ordered across the processes with an IPC event: the exporter
//! creates it ([`Device::create_ipc_event`]) and sends its handle ([`Event::ipc_handle`], 64
//! bytes, [`IpcEventHandle`] prints them as hex); the other process opens it
//! ([`Device::open_ipc_event`]) and waits on it from a stream, which orders its later work
//! after the exporter's record.
//!
//! What another process records is outside this process's happens-before model: an opened
//! event is a foreign event ([`Device::adopt_event`]): a wait on it orders the backend stream,
//! and the model learns nothing from it. Memory a process exports must stay allocated while
//! others import it; the caching allocator's `DeviceBuffer::export_ipc` keeps its block
//! alive until every importer closed it.
//!
//! Every call validates before reaching the backend. What this process knows it refuses
//! itself: closing a key it did not export ([`IpcError::NotExported`]) or twice
//! ([`IpcError::AlreadyClosed`]), importing its own export ([`IpcError::OwnExport`]). A key
//! that another process closed, a foreign or garbled key, or one this process is not allowed
//! to import is refused by the backend and reported as [`IpcError::ImportRefused`] naming
//! the fixes, with the backend's own error (on ACL, the runtime's code and text) as its
//! cause. A backend that shares through host files (the simulator) refuses with its own typed
//! errors: an exporter that has ended ([`IpcError::ExporterEnded`]), a file of the shared
//! directory that is not what its name says ([`IpcError::BadFile`]), a directory without
//! room for an export ([`IpcError::NoSpace`]). After any of these the device and the other
//! exports and imports work as before.
//!
//! **A wait on another process's event can block the host.** On the simulator, a stream's
//! wait on an opened event (and its synchronize) blocks the calling thread, in real time,
//! until the exporter's record is done (bounded by the simulator's `ipc_timeout`, and failing
//! at once with [`IpcError::ExporterEnded`] when the exporter has ended); on ACL the wait is
//! queued on the device like any event wait.

pub mod shared_files;

use crate::device::Device;
use crate::error::{Result, StreamError};
use crate::event::{Event, EventInner};
use crate::hal::{Backend, Device as _, HalError};
use crate::sync::{GlobalMutex, GlobalMutexGuard};
use crate::types::{DevicePtr, DeviceSlice, EventFlags};
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

/// Bytes of an IPC event handle (ACL's `ACL_IPC_EVENT_HANDLE_SIZE`).
pub const IPC_EVENT_HANDLE_BYTES: usize = 64;

/// The longest key (ACL's keys are 65 bytes with their NUL).
pub const IPC_KEY_MAX_LEN: usize = 64;

/// Refusals of the IPC calls ([`StreamError::Ipc`]).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum IpcError {
    /// A key that cannot be one.
    #[error("{key:?} is not an IPC memory key ({reason}): pass the key the exporting process's Device::ipc_export returned, unchanged")]
    InvalidKey {
        /// The text given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An event handle that cannot be one.
    #[error("not an IPC event handle ({reason}): pass the 64 bytes (128 hex digits) the exporting process's Event::ipc_handle returned, unchanged")]
    InvalidEventHandle {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An export or import of no bytes.
    #[error("an IPC {what} of 0 bytes: share at least one byte")]
    Empty {
        /// `export` or `import`.
        what: &'static str,
    },
    /// An allow-list call without processes, or with an impossible id.
    #[error("process ids {pids:?} cannot be allowed: name at least one process, each by its positive id (Device::process_id in that process)")]
    BadPids {
        /// The ids given.
        pids: Vec<i32>,
    },
    /// An import asked for more bytes than were exported.
    #[error("the import of {key} asks for {asked} bytes but {exported} were exported: import at most the exported length")]
    LongerThanExported {
        /// The key.
        key: String,
        /// Bytes asked for.
        asked: u64,
        /// Bytes exported.
        exported: u64,
    },
    /// A close of a key this process did not export: another process's key (an importer
    /// closes its import by dropping its [`IpcMemory`]) or a garbled one.
    #[error("{key} is not an export of this process: close only keys this process's Device::ipc_export returned; an importer closes its import by dropping the IpcMemory")]
    NotExported {
        /// The key.
        key: String,
    },
    /// A second close of one export.
    #[error("the export {key} is already closed: close each export once (dropping the allocator's SharedBuffer closes it for you)")]
    AlreadyClosed {
        /// The key.
        key: String,
    },
    /// An import of this process's own export (closed or not).
    #[error("{key} is this process's own export: import it in another process; here, use the exported memory itself")]
    OwnExport {
        /// The key.
        key: String,
    },
    /// The backend refused an import: the key is closed, foreign or not allowed.
    #[error("the import of {key} was refused: its exporter closed it or freed its memory, the key comes from another node or was garbled, or this process is not on its allow-list (send Device::process_id to the exporter, which calls Device::ipc_allow_pids); ask the exporter for a current key ({cause})")]
    ImportRefused {
        /// The key.
        key: String,
        /// What the backend said.
        #[source]
        cause: HalError,
    },
    /// The backend refused to open an event handle: its event is gone, or the handle is not
    /// one.
    #[error("the IPC event handle was refused: pass the handle the exporting process's Event::ipc_handle returned while that event lives ({cause})")]
    EventOpenRefused {
        /// What the backend said.
        #[source]
        cause: HalError,
    },
    /// The process that exported memory or an event has ended: what it shared ended with it,
    /// as on a device. Refused at once: an import of its memory, and a wait on (or query of)
    /// its event whose last record it never published.
    #[error("the process {pid} that exported {key} has ended: what it shared ended with it; ask a running exporter for a current key or handle")]
    ExporterEnded {
        /// The key of the export (for an event, the key its handle holds).
        key: String,
        /// The exporter's process id.
        pid: u32,
    },
    /// A file of the directory through which processes share (the simulator's memory and
    /// events, the caching allocator's reference counters) that is not what its name says: too
    /// short for its header, claiming more bytes than it holds, not a regular file, or not
    /// written by braid. Whoever can write the directory can leave one there; braid refuses
    /// it, never maps it.
    #[error("{path} is not a usable IPC file of braid ({reason}): it was not written by braid, or was cut short; remove it, and ask the exporter for a current key")]
    BadFile {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The directory through which processes share has no room for the file of an export
    /// (a container's `/dev/shm` holds 64 MiB by default).
    #[error("no room for the {needed}-byte file of an IPC export in {dir} ({free} bytes free there): free space there, give it more (a container's /dev/shm: docker run --shm-size), or set {variable} to a directory with room")]
    NoSpace {
        /// The directory.
        dir: String,
        /// The environment variable that names another directory.
        variable: &'static str,
        /// Bytes the file needs.
        needed: u64,
        /// Bytes free in the directory's file system when the export was refused.
        free: u64,
    },
}

/// Whether an export of this process is still open ([`Device::ipc_close_export`] closes it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ExportState {
    Open,
    Closed,
}

/// This process's exports, by key: keys name process-wide objects of the runtime (ACL's
/// keys do not depend on the device or the context), so one table serves every device.
fn exports() -> GlobalMutexGuard<'static, HashMap<String, ExportState>> {
    static EXPORTS: OnceLock<GlobalMutex<HashMap<String, ExportState>>> = OnceLock::new();
    EXPORTS.get_or_init(Default::default).lock()
}

/// The backend's refusal as the IPC error naming the fix, where it is one (a backend that
/// lacks the call stays [`HalError::Unsupported`]; a backend's own typed IPC error stays
/// itself).
fn refused(err: HalError, wrap: impl FnOnce(HalError) -> IpcError) -> StreamError {
    match err {
        HalError::Unsupported(_) => StreamError::Backend(err),
        HalError::Ipc(ipc) => StreamError::Ipc(*ipc),
        cause => StreamError::Ipc(wrap(cause)),
    }
}

/// The key of exported memory: a short string the exporter hands to the importers.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct IpcMemKey(String);

impl IpcMemKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IpcMemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for IpcMemKey {
    type Err = StreamError;

    /// Parses a key received from the exporter: 1 to [`IPC_KEY_MAX_LEN`] printable ASCII
    /// characters.
    fn from_str(key: &str) -> Result<Self> {
        let reason = if key.is_empty() {
            Some("empty")
        } else if key.len() > IPC_KEY_MAX_LEN {
            Some("longer than 64 bytes")
        } else if !key.bytes().all(|b| b.is_ascii_graphic()) {
            Some("not printable ASCII")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(StreamError::Ipc(IpcError::InvalidKey {
                key: key.to_string(),
                reason,
            })),
            None => Ok(IpcMemKey(key.to_string())),
        }
    }
}

/// The handle of an IPC event: 64 opaque bytes, printed as 128 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct IpcEventHandle(pub [u8; IPC_EVENT_HANDLE_BYTES]);

impl fmt::Display for IpcEventHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl FromStr for IpcEventHandle {
    type Err = StreamError;

    /// Parses the 128 hex digits [`IpcEventHandle`]'s `Display` prints.
    fn from_str(text: &str) -> Result<Self> {
        let bad = |reason| StreamError::Ipc(IpcError::InvalidEventHandle { reason });
        if text.len() != 2 * IPC_EVENT_HANDLE_BYTES {
            return Err(bad("not 128 hex digits"));
        }
        let mut out = [0u8; IPC_EVENT_HANDLE_BYTES];
        for (i, byte) in out.iter_mut().enumerate() {
            let digits = text.get(2 * i..2 * i + 2).ok_or(bad("not hex"))?;
            *byte = u8::from_str_radix(digits, 16).map_err(|_| bad("not hex"))?;
        }
        Ok(IpcEventHandle(out))
    }
}

/// Memory another process exported, mapped into this device ([`Device::ipc_import`]). It is
/// unmapped (`aclrtIpcMemClose`) when dropped, after the device finished its work.
pub struct IpcMemory<B: Backend> {
    device: Device<B>,
    key: IpcMemKey,
    ptr: DevicePtr,
    len: u64,
}

impl<B: Backend> fmt::Debug for IpcMemory<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IpcMemory({} bytes at {} from {})",
            self.len, self.ptr, self.key
        )
    }
}

impl<B: Backend> IpcMemory<B> {
    /// The imported bytes.
    pub fn slice(&self) -> DeviceSlice {
        DeviceSlice::new(self.ptr, self.len)
    }

    /// The key it was imported by.
    pub fn key(&self) -> &IpcMemKey {
        &self.key
    }
}

impl<B: Backend> Drop for IpcMemory<B> {
    fn drop(&mut self) {
        if let Err(err) = self.device.synchronize() {
            tracing::warn!(%err, key = %self.key, "could not synchronize before closing an IPC import");
        }
        // SAFETY: the device finished its work on the memory (synchronized above); work still
        // captured on it would run on an unmapped range, which the backend reports.
        if let Err(err) = unsafe { self.device.hal().ipc_close(self.key.as_str()) } {
            tracing::warn!(%err, key = %self.key, "closing an IPC import failed");
        }
    }
}

impl<B: Backend> Device<B> {
    /// This process's id as IPC allow-lists take it (ACL: `aclrtDeviceGetBareTgid`); send it
    /// to the exporter, which passes it to [`Device::ipc_allow_pids`].
    pub fn process_id(&self) -> Result<i32> {
        Ok(self.hal().process_id()?)
    }

    /// Shares `range` (memory of this device, inside one allocation) with other processes:
    /// the key to send them. With `allow_list`, only processes added by
    /// [`Device::ipc_allow_pids`] may import it (ACL's default); without, any may.
    ///
    /// The range must stay allocated while any process imports it (the caching allocator's
    /// `DeviceBuffer::export_ipc` sees to it).
    pub fn ipc_export(&self, range: DeviceSlice, allow_list: bool) -> Result<IpcMemKey> {
        if range.len == 0 {
            return Err(StreamError::Ipc(IpcError::Empty { what: "export" }));
        }
        if self.hal().is_live(range) == Some(false) {
            return Err(StreamError::RangeNotLive {
                work: "IPC export".into(),
                range,
                device: self.id(),
            });
        }
        let key: IpcMemKey = self.hal().ipc_export(range, allow_list)?.parse()?;
        exports().insert(key.0.clone(), ExportState::Open);
        tracing::info!(%key, %range, allow_list, "device memory exported to other processes");
        Ok(key)
    }

    /// Lets the processes `pids` import this process's export `key`.
    pub fn ipc_allow_pids(&self, key: &IpcMemKey, pids: &[i32]) -> Result<()> {
        if pids.is_empty() || pids.iter().any(|&p| p <= 0) {
            return Err(StreamError::Ipc(IpcError::BadPids {
                pids: pids.to_vec(),
            }));
        }
        Ok(self.hal().ipc_allow_pids(key.as_str(), pids)?)
    }

    /// Stops sharing this process's export `key`: no new process may import it (the
    /// importers keep theirs). A key this process did not export is
    /// [`IpcError::NotExported`], a second close [`IpcError::AlreadyClosed`]; neither
    /// reaches the backend.
    pub fn ipc_close_export(&self, key: &IpcMemKey) -> Result<()> {
        let mut exports = exports();
        match exports.get(key.as_str()) {
            None => {
                return Err(StreamError::Ipc(IpcError::NotExported {
                    key: key.to_string(),
                }))
            }
            Some(ExportState::Closed) => {
                return Err(StreamError::Ipc(IpcError::AlreadyClosed {
                    key: key.to_string(),
                }))
            }
            Some(ExportState::Open) => {}
        }
        // SAFETY: an export's memory stays this process's; only imports unmap anything.
        unsafe { self.hal().ipc_close(key.as_str()) }?;
        exports.insert(key.0.clone(), ExportState::Closed);
        tracing::info!(%key, "IPC export closed");
        Ok(())
    }

    /// Maps `len` bytes another process exported under `key` into this device.
    pub fn ipc_import(&self, key: &IpcMemKey, len: u64) -> Result<IpcMemory<B>> {
        if len == 0 {
            return Err(StreamError::Ipc(IpcError::Empty { what: "import" }));
        }
        if exports().contains_key(key.as_str()) {
            return Err(StreamError::Ipc(IpcError::OwnExport {
                key: key.to_string(),
            }));
        }
        let (ptr, exported) = self.hal().ipc_import(key.as_str()).map_err(|e| {
            refused(e, |cause| IpcError::ImportRefused {
                key: key.to_string(),
                cause,
            })
        })?;
        let memory = IpcMemory {
            device: self.clone(),
            key: key.clone(),
            ptr,
            len,
        };
        if let Some(exported) = exported.filter(|&e| len > e) {
            // Dropping the import closes it.
            return Err(StreamError::Ipc(IpcError::LongerThanExported {
                key: key.to_string(),
                asked: len,
                exported,
            }));
        }
        tracing::info!(%key, %ptr, len, "device memory of another process imported");
        Ok(memory)
    }

    /// Creates an event other processes may wait on (ACL: `ACL_EVENT_IPC`); send them
    /// [`Event::ipc_handle`]. It orders work like any event here.
    pub fn create_ipc_event(&self) -> Result<Event<B>> {
        let hal = self.hal().create_ipc_event()?;
        Ok(Event::from_parts(
            self.clone(),
            Arc::new(EventInner::new(hal, EventFlags::ORDERING, None)),
        ))
    }

    /// Opens the event of another process that `handle` names: streams here may wait on it
    /// (ordering their later work after its exporter's last record), the host may query or
    /// synchronize it. On the simulator a stream's wait on it blocks the calling thread until
    /// that record is done (see the [module](self)). It is a foreign event ([`Device::adopt_event`]); recording it, or
    /// handing out its handle, is the exporter's alone (the backend refuses both).
    pub fn open_ipc_event(&self, handle: &IpcEventHandle) -> Result<Event<B>> {
        let hal = self
            .hal()
            .open_ipc_event(&handle.0)
            .map_err(|e| refused(e, |cause| IpcError::EventOpenRefused { cause }))?;
        Ok(self.adopt_event(hal, EventFlags::ORDERING))
    }
}

impl<B: Backend> Event<B> {
    /// The handle other processes open this event by ([`Device::open_ipc_event`]); the event
    /// must come from [`Device::create_ipc_event`].
    pub fn ipc_handle(&self) -> Result<IpcEventHandle> {
        Ok(IpcEventHandle(
            self.device().hal().ipc_event_handle(self.hal())?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_handles_parse_back_and_refuse_garbage() {
        let key: IpcMemKey = "braid-sim-ipc-1-2".parse().unwrap();
        assert_eq!(key.to_string(), "braid-sim-ipc-1-2");
        for bad in ["", "has space", &"k".repeat(65)] {
            assert!(matches!(
                bad.parse::<IpcMemKey>(),
                Err(StreamError::Ipc(IpcError::InvalidKey { .. }))
            ));
        }
        let mut bytes = [0u8; IPC_EVENT_HANDLE_BYTES];
        bytes[..3].copy_from_slice(b"abc");
        let handle = IpcEventHandle(bytes);
        assert_eq!(
            handle.to_string().parse::<IpcEventHandle>().unwrap(),
            handle
        );
        assert!("zz".parse::<IpcEventHandle>().is_err());
        assert!("g".repeat(128).parse::<IpcEventHandle>().is_err());
    }

    #[test]
    fn a_backends_typed_ipc_refusal_is_the_front_layers_ipc_error() {
        let ended = IpcError::ExporterEnded {
            key: "braid-sim-ipc-1-2".into(),
            pid: 1,
        };
        let err = StreamError::from(HalError::Ipc(Box::new(ended.clone())));
        assert_eq!(err, StreamError::Ipc(ended.clone()));
        let refused = refused(HalError::Ipc(Box::new(ended.clone())), |cause| {
            IpcError::EventOpenRefused { cause }
        });
        assert_eq!(refused, StreamError::Ipc(ended));
        assert!(matches!(
            StreamError::from(HalError::InvalidArgument("x".into())),
            StreamError::Backend(_)
        ));
    }
}
