//! Sharing a buffer's memory with other processes, kept alive while they import it (as
//! PyTorch's CUDA IPC keeps a sent block in "limbo" until the receivers' reference counters
//! fall to zero).
//!
//! [`DeviceBuffer::export_ipc`] shares the buffer's block ([`Device::ipc_export`]) and makes a
//! reference counter that the importing processes count themselves in: a small file mapped by
//! every process (in `/dev/shm` unless [`REFS_DIR_ENV`] names another directory). The
//! [`IpcBufferHandle`] (key, length, counter) is text to send to the other processes;
//! [`import_ipc`] there maps the memory and counts itself in, and dropping the
//! [`ImportedBuffer`] closes the import and counts itself out. When the exporter drops its
//! [`SharedBuffer`], the export closes (no new import) and the block is freed at once if no
//! process imports it, else kept until the last importer is gone: the next
//! [`release_unimported`] (each export and each drop of a shared buffer calls it) frees it.
//!
//! The counter is braid's: the ACL runtime has none, and imports made outside braid are not
//! counted.
//!
//! Its file cannot crash a process, and does not outlive its exporter's: it is created with
//! its bytes reserved (a directory without room refuses the export with
//! [`IpcError::NoSpace`], naming it and
//! [`REFS_DIR_ENV`]), opened only when it is a regular file of its full length (else
//! [`IpcError::BadFile`]), and an import of an exporter
//! that ended is [`IpcError::ExporterEnded`]. The
//! counters that ended exporters left behind (a crash, a process that never dropped its
//! shared buffers) are removed by the first export of each later process.

use crate::buffer::DeviceBuffer;
use crate::error::AllocError;
use braid_stream_core::hal::{Backend, HalError};
use braid_stream_core::ipc::shared_files::{self, owner_pid, process_has_ended};
use braid_stream_core::sync::GlobalMutex;
use braid_stream_core::{Device, DeviceSlice, IpcError, IpcMemKey, IpcMemory, StreamError};
use memmap2::{MmapMut, MmapOptions};
use std::any::Any;
use std::fmt;
use std::fs::File;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Once};

/// The environment variable naming the directory of the reference counters (unset:
/// `/dev/shm` where it is a directory, else the temporary directory; set to nothing: refused).
pub const REFS_DIR_ENV: &str = "BRAID_IPC_REFS_DIR";
const REFS_PREFIX: &str = "braid-ipc-refs-";
const REFS_BYTES: u64 = 4096;

fn refs_dir() -> Result<PathBuf, AllocError> {
    match std::env::var_os(REFS_DIR_ENV) {
        Some(v) if v.is_empty() => Err(AllocError::InvalidArgument(format!(
            "{REFS_DIR_ENV} is set to nothing: unset it (for /dev/shm) or name a directory"
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

fn refs_error(what: &str, name: &str, e: impl fmt::Display) -> AllocError {
    AllocError::InvalidArgument(format!("{what} the IPC reference counter {name:?}: {e}"))
}

/// A refusal of the shared files, typed as the front layer types it.
fn files_error(e: HalError) -> AllocError {
    AllocError::Stream(StreamError::from(e))
}

/// A reference counter every process of an export maps.
struct RefCounter {
    name: String,
    path: PathBuf,
    map: MmapMut,
    _file: File,
}

impl RefCounter {
    /// A new counter of this process, its bytes reserved. The first one of a process first
    /// removes the counters of exporters that ended.
    fn create() -> Result<Self, AllocError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        static SWEEP: Once = Once::new();
        let dir = refs_dir()?;
        SWEEP.call_once(|| {
            let removed = shared_files::sweep_ended(&dir, REFS_PREFIX);
            if removed > 0 {
                tracing::info!(removed, dir = %dir.display(), "removed the IPC reference counters of ended exporters");
            }
        });
        let name = format!(
            "{REFS_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(&name);
        let file = shared_files::create(&path, REFS_BYTES, REFS_DIR_ENV).map_err(files_error)?;
        Self::map(name, path.clone(), file).inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })
    }

    /// Opens the counter `name` of the export of `key`, refusing a name that is not a
    /// counter's, a file that is not one, and an exporter that ended.
    fn open(name: &str, key: &IpcMemKey) -> Result<Self, AllocError> {
        let Some(pid) = owner_pid(name, REFS_PREFIX) else {
            return Err(AllocError::InvalidArgument(format!(
                "{name:?} is not an IPC reference counter of braid: pass the handle the exporting process's SharedBuffer::handle gave, unchanged"
            )));
        };
        if process_has_ended(pid) {
            return Err(AllocError::Stream(StreamError::Ipc(
                IpcError::ExporterEnded {
                    key: key.to_string(),
                    pid,
                },
            )));
        }
        let path = refs_dir()?.join(name);
        let Some((file, _)) = shared_files::open(&path, REFS_BYTES).map_err(files_error)? else {
            return Err(AllocError::InvalidArgument(format!(
                "the export of {name:?} is gone (its exporter dropped it, or ended): ask the exporting process for a current handle"
            )));
        };
        Self::map(name.to_string(), path, file)
    }

    fn map(name: String, path: PathBuf, file: File) -> Result<Self, AllocError> {
        // SAFETY: a regular file of at least `REFS_BYTES` bytes (reserved at its creation, or
        // its length checked when opened); its one word is only accessed atomically, by every
        // process mapping it.
        let map = unsafe { MmapOptions::new().len(REFS_BYTES as usize).map_mut(&file) }
            .map_err(|e| refs_error("cannot map", &name, e))?;
        Ok(RefCounter {
            name,
            path,
            map,
            _file: file,
        })
    }

    fn count(&self) -> &AtomicU32 {
        let ptr = self.map.as_ptr().cast::<u32>().cast_mut();
        // SAFETY: the map is page-aligned and at least 4 bytes long, and lives as long as
        // `self`; every process accesses the word atomically.
        unsafe { AtomicU32::from_ptr(ptr) }
    }

    fn importers(&self) -> u32 {
        self.count().load(Ordering::Acquire)
    }

    fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What an importing process needs: the memory's key, its length, and the export's reference
/// counter. Its `Display` is one line of text, which `FromStr` parses back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct IpcBufferHandle {
    /// The key of the exported memory.
    pub key: IpcMemKey,
    /// Bytes shared.
    pub len: u64,
    /// The reference counter's name.
    pub refs: String,
}

impl fmt::Display for IpcBufferHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.key, self.len, self.refs)
    }
}

impl FromStr for IpcBufferHandle {
    type Err = AllocError;

    fn from_str(text: &str) -> Result<Self, AllocError> {
        let bad = || {
            AllocError::InvalidArgument(format!(
                "{text:?} is not an IPC buffer handle (\"<key> <length> <counter>\"): pass SharedBuffer::handle's text unchanged"
            ))
        };
        let mut parts = text.split(' ');
        let (Some(key), Some(len), Some(refs), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        Ok(IpcBufferHandle {
            key: key.parse()?,
            len: len.parse().map_err(|_| bad())?,
            refs: refs.to_string(),
        })
    }
}

/// Blocks whose exporter let go while other processes still import them.
type Limbo = Vec<(RefCounter, Box<dyn Any + Send>)>;
static LIMBO: GlobalMutex<Limbo> = GlobalMutex::new(Vec::new());

/// Frees the buffers whose exporter let go and whose importers are all gone; returns how many.
pub fn release_unimported() -> usize {
    let freed: Limbo = {
        let mut limbo = LIMBO.lock();
        let (gone, kept): (Limbo, Limbo) = std::mem::take(&mut *limbo)
            .into_iter()
            .partition(|(refs, _)| refs.importers() == 0);
        *limbo = kept;
        gone
    };
    for (refs, _) in &freed {
        refs.remove();
        tracing::debug!(refs = %refs.name, "shared buffer released after its last importer");
    }
    // The buffers drop (and free their blocks) here, outside the lock.
    freed.len()
}

/// Buffers kept for other processes' imports after their exporter let go.
pub fn buffers_kept_for_importers() -> usize {
    LIMBO.lock().len()
}

/// A buffer shared with other processes ([`DeviceBuffer::export_ipc`]). Use its memory as the
/// buffer's ([`SharedBuffer::slice`]); dropping it stops new imports and frees the block once
/// no process imports it.
pub struct SharedBuffer<B: Backend> {
    buffer: Option<DeviceBuffer<B>>,
    key: IpcMemKey,
    refs: Option<RefCounter>,
}

impl<B: Backend> fmt::Debug for SharedBuffer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBuffer")
            .field("key", &self.key)
            .field("buffer", &self.buffer)
            .field("importers", &self.importers())
            .finish()
    }
}

impl<B: Backend> DeviceBuffer<B> {
    /// Shares this buffer's memory with other processes of the node (torch_npu's IPC of a
    /// tensor's storage): send [`SharedBuffer::handle`] to them. With `allow_list`, only
    /// processes added by [`SharedBuffer::allow_pids`] may import it (ACL's default).
    ///
    /// The block stays allocated while any process imports it, also after the returned
    /// [`SharedBuffer`] is dropped. Refused for an empty buffer, and (by the backend) for
    /// memory it cannot share (a block of an expandable segment: share the physical memory
    /// by shareable handle instead); the buffer is dropped (freed) then.
    pub fn export_ipc(self, allow_list: bool) -> Result<SharedBuffer<B>, AllocError> {
        release_unimported();
        let device = self.allocator().device().clone();
        let key = device.ipc_export(self.slice(), allow_list)?;
        let refs = match RefCounter::create() {
            Ok(refs) => refs,
            Err(e) => {
                let _ = device.ipc_close_export(&key);
                return Err(e);
            }
        };
        tracing::info!(%key, refs = %refs.name, len = self.size(), "buffer shared with other processes");
        Ok(SharedBuffer {
            buffer: Some(self),
            key,
            refs: Some(refs),
        })
    }
}

impl<B: Backend> SharedBuffer<B> {
    fn buffer(&self) -> &DeviceBuffer<B> {
        self.buffer
            .as_ref()
            .expect("a shared buffer holds its buffer until dropped")
    }

    /// The text another process imports the memory by ([`import_ipc`]).
    pub fn handle(&self) -> IpcBufferHandle {
        IpcBufferHandle {
            key: self.key.clone(),
            len: self.buffer().size(),
            refs: self
                .refs
                .as_ref()
                .map_or_else(String::new, |r| r.name.clone()),
        }
    }

    /// Lets processes `pids` import it (each from its own `Device::process_id`).
    pub fn allow_pids(&self, pids: &[i32]) -> Result<(), AllocError> {
        let device = self.buffer().allocator().device().clone();
        Ok(device.ipc_allow_pids(&self.key, pids)?)
    }

    /// The buffer's memory.
    pub fn slice(&self) -> DeviceSlice {
        self.buffer().slice()
    }

    /// The buffer.
    pub fn buffer_ref(&self) -> &DeviceBuffer<B> {
        self.buffer()
    }

    /// Processes importing it now.
    pub fn importers(&self) -> u32 {
        self.refs.as_ref().map_or(0, RefCounter::importers)
    }
}

impl<B: Backend> Drop for SharedBuffer<B> {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        let device = buffer.allocator().device().clone();
        if let Err(err) = device.ipc_close_export(&self.key) {
            tracing::warn!(%err, key = %self.key, "closing an IPC export failed");
        }
        let Some(refs) = self.refs.take() else {
            return;
        };
        if refs.importers() == 0 {
            refs.remove();
            drop(buffer);
        } else {
            tracing::info!(key = %self.key, importers = refs.importers(), "shared buffer kept while other processes import it");
            LIMBO.lock().push((refs, Box::new(buffer)));
        }
        release_unimported();
    }
}

/// Memory another process shared with [`DeviceBuffer::export_ipc`], mapped into this
/// process's device ([`import_ipc`]). Dropping it closes the import and counts this process
/// out of the export.
pub struct ImportedBuffer<B: Backend> {
    memory: Option<IpcMemory<B>>,
    refs: Arc<RefCounter>,
}

impl<B: Backend> fmt::Debug for ImportedBuffer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportedBuffer")
            .field("memory", &self.memory)
            .finish()
    }
}

impl<B: Backend> ImportedBuffer<B> {
    /// The shared memory, on this process's device.
    pub fn slice(&self) -> DeviceSlice {
        self.memory
            .as_ref()
            .map_or_else(DeviceSlice::default, IpcMemory::slice)
    }
}

impl<B: Backend> Drop for ImportedBuffer<B> {
    fn drop(&mut self) {
        // Closed (after the device's work on it) before the exporter may free it.
        drop(self.memory.take());
        let _ = self
            .refs
            .count()
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
    }
}

/// Maps the buffer another process shared (its [`IpcBufferHandle`]) into `device`, counting
/// this process in until the returned buffer drops.
pub fn import_ipc<B: Backend>(
    device: &Device<B>,
    handle: &IpcBufferHandle,
) -> Result<ImportedBuffer<B>, AllocError> {
    let refs = Arc::new(RefCounter::open(&handle.refs, &handle.key)?);
    // Counted in before the import, so the exporter cannot free the block in between.
    refs.count().fetch_add(1, Ordering::AcqRel);
    match device.ipc_import(&handle.key, handle.len) {
        Ok(memory) => Ok(ImportedBuffer {
            memory: Some(memory),
            refs,
        }),
        Err(e) => {
            refs.count().fetch_sub(1, Ordering::AcqRel);
            Err(e.into())
        }
    }
}
