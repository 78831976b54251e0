//! The engine's side of sharing with other processes ([`crate::ipc`]): exports, imports and
//! closes of memory, shareable physical memory, and IPC events (records published complete
//! once the host clock passes them).

use super::{invalid, Engine};
use crate::ipc::file::{Kind, SharedFile};
use crate::ipc::{
    handle_of_key, key_of_handle, key_of_shareable, shareable_of_key, EventExport, IpcState,
    MemExport, MemImport, PhysicalShare, IPC_EVENT_HANDLE_BYTES,
};
use braid_stream_core::hal::HalError;
use braid_stream_core::types::{DevicePtr, DeviceSlice, EventFlags};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

impl Engine {
    /// Exports `range` (inside one allocation of the current device) under a new key;
    /// importers must be on its allow-list when `pid_check`. A range whose bytes an earlier
    /// export still shares is refused (see [`Engine::ipc_reclaim`]).
    pub fn ipc_export(&mut self, range: DeviceSlice, pid_check: bool) -> Result<String, HalError> {
        self.host_call("ipc_export");
        let dev = self.cur;
        let base = self.memories[dev]
            .plain_segment_of(range)
            .map_err(HalError::InvalidArgument)?;
        let offset = range.ptr.0 - base;
        self.ipc_reclaim(dev, base, offset, range)?;
        let file = IpcState::create(Kind::Memory, range.len, pid_check)?;
        let shared = file.map_data().and_then(|map| {
            self.memories[dev]
                .share_range(base, offset, map)
                .map_err(invalid)
        });
        if let Err(e) = shared {
            file.close();
            return Err(e);
        }
        let key = file.key().to_string();
        tracing::debug!(%key, %range, pid_check, "sim IPC memory exported");
        self.ipc.exports.insert(
            key.clone(),
            MemExport {
                device: dev,
                base,
                offset,
                len: range.len,
                file,
            },
        );
        Ok(key)
    }

    /// Takes the bytes of the closed exports that no process imports any more back from
    /// their files (whose room in the directory goes with the last map of them).
    fn ipc_reclaim_unimported(&mut self) {
        let (back, kept): (Vec<MemExport>, Vec<MemExport>) = std::mem::take(&mut self.ipc.closed)
            .into_iter()
            .partition(|e| e.file.imports() == 0);
        self.ipc.closed = kept;
        for e in back {
            self.memories[e.device].unshare_range(e.base, e.offset);
            tracing::debug!(key = %e.file.key(), "sim IPC bytes of a closed export taken back");
        }
    }

    /// Makes `range` (at `offset` in allocation `base` of device `dev`) free to share anew
    /// (a block the caching allocator shared, freed when its export closed, and hands out
    /// again): the closed exports that no process imports any more give their bytes back.
    /// The simulator shares a byte through one file at a time, so a range an open export
    /// shares, or one a closed export's importers still map, is refused, saying what to do.
    fn ipc_reclaim(
        &mut self,
        dev: usize,
        base: u64,
        offset: u64,
        range: DeviceSlice,
    ) -> Result<(), HalError> {
        let len = range.len;
        if let Some((key, _)) = self
            .ipc
            .exports
            .iter()
            .find(|(_, e)| e.overlaps(dev, base, offset, len))
        {
            return Err(invalid(format!(
                "{range} overlaps memory this process shares under the key {key:?}, still open: send the importers that key, or close it first (Device::ipc_close_export; dropping the caching allocator's SharedBuffer closes it)"
            )));
        }
        if let Some(e) = self
            .ipc
            .closed
            .iter()
            .find(|e| e.overlaps(dev, base, offset, len) && e.file.imports() > 0)
        {
            return Err(invalid(format!(
                "{range} overlaps memory this process shared under the key {:?}, closed but still imported by {} process(es): it is theirs too until they close their imports (dropping the ImportedBuffer); share it again after that",
                e.file.key(),
                e.file.imports()
            )));
        }
        self.ipc_reclaim_unimported();
        Ok(())
    }

    /// Adds `pids` to the allow-list of this process's export `key` (memory, or a shareable
    /// physical handle's key).
    pub fn ipc_allow(&mut self, key: &str, pids: &[i32]) -> Result<(), HalError> {
        self.host_call("ipc_allow");
        let file = match self.ipc.exports.get(key) {
            Some(e) => e.file.clone(),
            None => self
                .ipc
                .physical
                .values()
                .find(|p| p.exported && p.file.key() == key)
                .map(|p| p.file.clone())
                .ok_or_else(|| {
                    invalid(format!(
                        "{key:?} is not an open export of this process: export the memory first (and only its exporter sets the allow-list)"
                    ))
                })?,
        };
        file.allow(pids)
    }

    /// Opens `file` for an import by this process, checking the rules. An import of memory
    /// is counted in the file before it returns (the caller counts it out if it fails later):
    /// an export closed meanwhile is refused here, or its exporter sees the import.
    fn open_import(&self, key: &str, kind: Kind) -> Result<SharedFile, HalError> {
        if self.ipc.exported_here(key) {
            return Err(invalid(format!(
                "{key:?} is an export of this very process: use the memory or event itself; keys are for other processes"
            )));
        }
        let file = SharedFile::open(key, kind)?;
        let me = std::process::id();
        if !file.allows(me) {
            return Err(invalid(format!(
                "process {me} is not on the allow-list of {key:?}: the exporter (process {}) must add it first (aclrtIpcMemSetImportPid, Device::ipc_allow_pids)",
                file.exporter()
            )));
        }
        if kind == Kind::Memory {
            file.add_import();
            if !file.is_open() {
                file.remove_import();
                return Err(invalid(format!(
                    "the export {key:?} was closed by its exporter: ask the exporting process for a current key"
                )));
            }
        }
        Ok(file)
    }

    /// Imports the memory of `key` as a new allocation of the current device: its address and
    /// size.
    pub fn ipc_import(&mut self, key: &str) -> Result<(DevicePtr, u64), HalError> {
        self.host_call("ipc_import");
        if self.ipc.imports.contains_key(key) {
            return Err(invalid(format!(
                "{key:?} is imported in this process already: use the address of that import"
            )));
        }
        let file = self.open_import(key, Kind::Memory)?;
        let size = file.size();
        let imported = file
            .map_data()
            .and_then(|map| self.memories[self.cur].import_segment(size, map));
        let ptr = imported.inspect_err(|_| file.remove_import())?;
        if self.lifetimes {
            self.sanitizer.segment_alloc(ptr.0, size);
        }
        tracing::debug!(%key, %ptr, size, "sim IPC memory imported");
        self.ipc.imports.insert(
            key.to_string(),
            MemImport {
                device: self.cur,
                ptr: ptr.0,
                file: Arc::new(file),
            },
        );
        Ok((ptr, size))
    }

    /// Closes `key`: an import is unmapped (its allocation freed); an export takes no new
    /// imports (the importers keep theirs).
    pub fn ipc_close(&mut self, key: &str) -> Result<(), HalError> {
        self.host_call("ipc_close");
        if let Some(import) = self.ipc.imports.get(key) {
            let (device, ptr) = (import.device, DevicePtr(import.ptr));
            let saved = std::mem::replace(&mut self.cur, device);
            let freed = self
                .end_lifetime(ptr)
                .and_then(|()| self.memories[device].free(ptr));
            self.cur = saved;
            freed?;
            if let Some(import) = self.ipc.imports.remove(key) {
                import.file.remove_import();
            }
            tracing::debug!(%key, "sim IPC import closed");
            return Ok(());
        }
        if let Some(export) = self.ipc.exports.remove(key) {
            export.file.close();
            tracing::debug!(%key, imports = export.file.imports(), "sim IPC export closed");
            // Its importers keep sharing the bytes; with none, they come back at once.
            self.ipc.closed.push(export);
            self.ipc_reclaim_unimported();
            return Ok(());
        }
        Err(invalid(format!(
            "{key:?} is neither exported nor imported by this process (closed already?)"
        )))
    }

    /// An allocation went: its exports close, and a freed import counts as closed.
    pub(super) fn ipc_segment_freed(&mut self, base: u64) {
        let dev = self.cur;
        let gone: Vec<String> = self
            .ipc
            .exports
            .iter()
            .filter(|(_, e)| e.device == dev && e.base == base)
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if let Some(export) = self.ipc.exports.remove(&key) {
                export.file.close();
            }
        }
        self.ipc
            .closed
            .retain(|e| !(e.device == dev && e.base == base));
        let imported: Vec<String> = self
            .ipc
            .imports
            .iter()
            .filter(|(_, i)| i.device == dev && i.ptr == base)
            .map(|(k, _)| k.clone())
            .collect();
        for key in imported {
            if let Some(import) = self.ipc.imports.remove(&key) {
                import.file.remove_import();
            }
        }
    }

    // ----- events -----

    /// Creates an event other processes may wait on (its records are published for them).
    pub fn create_ipc_event(&mut self) -> Result<usize, HalError> {
        let file = IpcState::create(Kind::Event, 0, false)?;
        let e = self.create_event(EventFlags::ORDERING);
        self.ipc.events_out.insert(
            e,
            EventExport {
                file,
                pending: VecDeque::new(),
            },
        );
        Ok(e)
    }

    /// The handle of IPC event `e`.
    pub fn ipc_event_handle(&self, e: usize) -> Result<[u8; IPC_EVENT_HANDLE_BYTES], HalError> {
        self.ipc
            .events_out
            .get(&e)
            .map(|x| handle_of_key(x.file.key()))
            .ok_or_else(|| {
                invalid("the event was not created as an IPC event: create it with create_ipc_event (ACL_EVENT_IPC)")
            })
    }

    /// Opens the event of another process that `handle` names.
    pub fn open_ipc_event(
        &mut self,
        handle: &[u8; IPC_EVENT_HANDLE_BYTES],
    ) -> Result<usize, HalError> {
        let key = key_of_handle(handle).map_err(invalid)?;
        let file = self.open_import(&key, Kind::Event)?;
        let e = self.create_event(EventFlags::ORDERING);
        self.ipc.events_in.insert(e, Arc::new(file));
        Ok(e)
    }

    /// The file of `e` when it is an event opened from another process.
    pub fn ipc_opened(&self, e: usize) -> Option<Arc<SharedFile>> {
        self.ipc.events_in.get(&e).cloned()
    }

    /// How long a wait on another process's event blocks.
    pub fn ipc_timeout(&self) -> Duration {
        self.ipc_timeout
    }

    /// Refuses a record of (or, from a capturing stream, a wait on) an IPC event where CANN
    /// does: an opened event is recorded by its exporter only, and IPC events are not
    /// capturable.
    pub(super) fn ipc_check_use(
        &self,
        e: usize,
        record: bool,
        capturing: bool,
    ) -> Result<(), HalError> {
        let opened = self.ipc.events_in.contains_key(&e);
        if record && opened {
            return Err(invalid(
                "an IPC event opened from another process is recorded only by the process that exported it",
            ));
        }
        if capturing && (opened || self.ipc.events_out.contains_key(&e)) {
            return Err(invalid(
                "IPC events cannot be recorded or waited on inside a capture: use them outside it",
            ));
        }
        Ok(())
    }

    /// Refuses a wait on another process's event from capturing stream `s`.
    pub fn ipc_check_wait(&self, s: u32) -> Result<(), HalError> {
        if self.stream(s)?.capture.is_some() {
            return Err(invalid(
                "IPC events cannot be recorded or waited on inside a capture: use them outside it",
            ));
        }
        Ok(())
    }

    /// An eager record of `e` completing at `t`: a new generation, published once the host
    /// passes `t`.
    pub(super) fn ipc_recorded(&mut self, e: usize, t: u64) {
        if let Some(x) = self.ipc.events_out.get_mut(&e) {
            let g = x.file.record();
            x.pending.push_back((g, t));
        }
        self.ipc_publish();
    }

    /// Publishes the records of exported events whose completion the host clock has passed
    /// (their data effects are applied by then).
    pub(super) fn ipc_publish(&mut self) {
        // A record is published once the data it orders is written: not past a kernel still
        // computing ([`crate::job`]).
        let frontier = self.queue.frontier();
        for (&e, x) in self.ipc.events_out.iter_mut() {
            let device = self.events.get(e).map_or(0, |ev| ev.device as usize);
            let host = self
                .devices
                .get(device)
                .map_or(0, |d| d.host_ns)
                .min(frontier);
            while let Some(&(g, t)) = x.pending.front() {
                if t > host {
                    break;
                }
                x.file.complete(g);
                x.pending.pop_front();
            }
        }
    }

    // ----- shareable physical memory -----

    /// Makes physical memory `handle` of the current device shareable: its shareable handle.
    /// One per handle (a second export is refused).
    pub fn export_physical(&mut self, handle: u64, pid_check: bool) -> Result<u64, HalError> {
        self.host_call("export_physical");
        let dev = self.cur;
        if self.ipc.physical.contains_key(&(dev, handle)) {
            return Err(invalid(format!(
                "physical handle {handle} is shared already: one shareable handle per physical handle"
            )));
        }
        let size = self.memories[dev]
            .physical_size(handle)
            .ok_or_else(|| invalid(format!("{handle} is not a live physical memory handle")))?;
        let file = IpcState::create(Kind::Memory, size, pid_check)?;
        let shared = file
            .map_data()
            .and_then(|map| self.memories[dev].share_physical(handle, map));
        if let Err(e) = shared {
            file.close();
            return Err(e);
        }
        let shareable = shareable_of_key(file.key())
            .ok_or_else(|| invalid("a key without a shareable number"))?;
        self.ipc.physical.insert(
            (dev, handle),
            PhysicalShare {
                device: dev,
                file,
                exported: true,
            },
        );
        Ok(shareable)
    }

    /// Adds `pids` to the allow-list of shareable handle `shareable` (this process's).
    pub fn allow_physical(&mut self, shareable: u64, pids: &[i32]) -> Result<(), HalError> {
        let key = key_of_shareable(shareable);
        self.ipc_allow(&key, pids)
    }

    /// Imports shareable handle `shareable` as a physical handle of the current device (its
    /// bytes are the exporter's, wherever it is mapped): the handle and its size.
    pub fn import_physical(&mut self, shareable: u64) -> Result<(u64, u64), HalError> {
        self.host_call("import_physical");
        let key = key_of_shareable(shareable);
        let file = self.open_import(&key, Kind::Memory)?;
        let size = file.size();
        let dev = self.cur;
        let handle = self.memories[dev]
            .alloc_physical(size)
            .inspect_err(|_| file.remove_import())?;
        let shared = file
            .map_data()
            .and_then(|map| self.memories[dev].share_physical(handle, map));
        if let Err(e) = shared {
            let _ = self.memories[dev].free_physical(handle);
            file.remove_import();
            return Err(e);
        }
        self.ipc.physical.insert(
            (dev, handle),
            PhysicalShare {
                device: dev,
                file: Arc::new(file),
                exported: false,
            },
        );
        Ok((handle, size))
    }

    /// A freed physical handle ends its sharing: an export is closed, an import counted out.
    pub(super) fn ipc_physical_freed(&mut self, handle: u64) {
        if let Some(share) = self.ipc.physical.remove(&(self.cur, handle)) {
            if share.exported {
                share.file.close();
            } else {
                share.file.remove_import();
            }
        }
    }

    /// A shared physical handle was mapped at `at`: its bytes are the shared ones there.
    pub(super) fn ipc_physical_mapped(
        &mut self,
        at: DevicePtr,
        handle: u64,
    ) -> Result<(), HalError> {
        let Some(share) = self.ipc.physical.get(&(self.cur, handle)) else {
            return Ok(());
        };
        debug_assert_eq!(share.device, self.cur);
        let map = share.file.map_data()?;
        self.memories[self.cur].overlay_mapping(at, map)
    }
}
