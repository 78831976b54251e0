//! [`AclDevice`]: the hal device over ACL, and the state its streams, events and graphs share.

use crate::aclnn::AclnnApi;
use crate::api::{AclApi, LoadError};
use crate::bind;
use crate::calls::{AclCalls, ApiRef, Handle};
use crate::error::{codes, AclError};
use crate::event::AclEvent;
use crate::ffi::{
    ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE, ACL_HBM_MEM, ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, ACL_STREAM_FAST_LAUNCH, ACL_STREAM_FAST_SYNC,
};
use crate::hccl::calls::HcclCalls;
use crate::hccl::error::Hccl;
use crate::hccl::HcclApi;
use crate::live;
use crate::native::Ownership;
use crate::stream::AclStream;
use crate::AclBackend;
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::sync::Mutex;
use braid_stream_core::types::{
    CaptureMode, DevicePtr, DeviceSlice, EventFlags, HostPtr, MemInfo, Priority,
};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// How the backend uses ACL. [`AclConfig::default`] is what torch_npu does.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AclConfig {
    /// Flags for `aclrtCreateStreamWithConfig`; default
    /// `ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC`.
    pub stream_flags: u32,
    /// `aclrtMemMallocPolicy` for segments; default `ACL_MEM_MALLOC_HUGE_FIRST`.
    pub malloc_policy: u32,
    /// Milliseconds a stream synchronize may take before it fails with
    /// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` (`aclrtSynchronizeStreamWithTimeout`, where the
    /// library has it); -1 waits forever (the default).
    pub sync_timeout_ms: i32,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            stream_flags: ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC,
            malloc_policy: ACL_MEM_MALLOC_HUGE_FIRST,
            sync_timeout_ms: -1,
        }
    }
}

/// Why a device could not be opened.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum OpenError {
    /// The library could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// An ACL call failed (`aclInit`, `aclrtGetDeviceCount`, `aclrtSetDevice`).
    #[error(transparent)]
    Acl(#[from] AclError),
    /// The ordinal is not below the device count.
    #[error("ACL device {ordinal} does not exist ({count} devices)")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: u32,
        /// Devices ACL reports.
        count: u32,
    },
}

/// Pseudo error number of [`OpenError::Load`] as a [`HalError::Native`].
pub const LOAD_FAILED_CODE: i32 = -1;

impl From<OpenError> for HalError {
    fn from(err: OpenError) -> Self {
        match err {
            OpenError::Load(e) => HalError::Native {
                code: LOAD_FAILED_CODE,
                name: "BRAID_ACL_LIBRARY_UNAVAILABLE",
                message: e.to_string(),
            },
            OpenError::Acl(e) => e.into(),
            e @ OpenError::NoSuchDevice { .. } => HalError::InvalidArgument(e.to_string()),
        }
    }
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// What a device's streams, events and graphs share: the calls, the device, the error kept
/// from a `Drop`, and the bookkeeping of active captures.
///
/// Its locks are the backend's own (`braid_stream_core::sync`, level 10): each is taken
/// alone, for one lookup or update, except `peers`, held across enabling a peer, with
/// `deferred` (every call's thread binding) taken under it.
pub(crate) struct Shared {
    pub(crate) calls: Arc<dyn AclCalls>,
    pub(crate) ordinal: u32,
    uid: u64,
    pub(crate) config: AclConfig,
    /// An error from a destroy call made in `Drop`, reported by the next call.
    deferred: Mutex<Option<AclError>>,
    /// Work nodes captured so far, by the model (`aclmdlRI`) of each active capture.
    captures: Mutex<HashMap<Handle, usize>>,
    active_captures: AtomicUsize,
    /// The physical memory handle (and its size) mapped at each address by `map_physical`.
    pub(crate) physical: Mutex<HashMap<u64, (Handle, u64)>>,
    /// The aclnn tables, loaded at the first kernel launch (or [`AclDevice::aclnn`]).
    aclnn: OnceLock<Result<&'static AclnnApi, String>>,
    /// The HCCL calls, over the table loaded at the first communicator.
    hccl: OnceLock<Result<Arc<dyn HcclCalls>, String>>,
    /// Peers this device's access to was enabled for (`aclrtDeviceEnablePeerAccess` is
    /// called once per peer: the lock is held across the call).
    peers: Mutex<HashSet<u32>>,
}

/// Pseudo error number of an aclnn library that could not be loaded, as a
/// [`HalError::Native`].
pub const ACLNN_LOAD_FAILED_CODE: i32 = -2;

/// Pseudo error number of an HCCL library that could not be loaded, as a
/// [`HalError::Native`].
pub const HCCL_LOAD_FAILED_CODE: i32 = -3;

impl Shared {
    /// What identifies this device's library among the libraries of the process: the
    /// loaded table's address (shared by every device opened on it), or this device's calls
    /// for a table-less test double.
    pub(crate) fn library_key(&self) -> usize {
        match self.calls.acl_api() {
            Some(api) => std::ptr::from_ref(api) as usize,
            None => Arc::as_ptr(&self.calls).cast::<()>() as usize,
        }
    }

    /// The aclnn tables that go with this device's ACL library, loaded once (see
    /// [`crate::aclnn`]). A library that could not be loaded is a typed error naming it,
    /// every time.
    pub(crate) fn aclnn(&self) -> Result<&'static AclnnApi, HalError> {
        let loaded = self.aclnn.get_or_init(|| match self.calls.acl_api() {
            Some(acl) => AclnnApi::load_for(acl).map_err(|e| e.to_string()),
            None => Err("no ACL library behind this device (a test double)".to_string()),
        });
        loaded.clone().map_err(|message| HalError::Native {
            code: ACLNN_LOAD_FAILED_CODE,
            name: "BRAID_ACLNN_LIBRARY_UNAVAILABLE",
            message,
        })
    }

    /// The HCCL calls over the table that goes with this device's ACL library, loaded once
    /// (see [`crate::hccl`]). A library that could not be loaded is a typed error naming it,
    /// every time.
    pub(crate) fn hccl(&self) -> Result<Arc<dyn HcclCalls>, HalError> {
        let loaded = self.hccl.get_or_init(|| match self.calls.acl_api() {
            Some(acl) => HcclApi::load_for(acl)
                .map(Hccl::loaded)
                .map_err(|e| e.to_string()),
            None => Err("no ACL library behind this device (a test double)".to_string()),
        });
        loaded.clone().map_err(|message| HalError::Native {
            code: HCCL_LOAD_FAILED_CODE,
            name: "BRAID_HCCL_LIBRARY_UNAVAILABLE",
            message,
        })
    }

    /// Gives a test double's device these HCCL calls (before its first communicator).
    #[cfg(test)]
    pub(crate) fn use_hccl_calls(&self, calls: Arc<dyn HcclCalls>) {
        let _ = self.hccl.set(Ok(calls));
    }

    /// The error for `code` from `call`, with the runtime's text for it.
    pub(crate) fn error(&self, call: &'static str, code: i32) -> AclError {
        let err = AclError::new(call, code, self.calls.recent_error_message());
        tracing::debug!(%err, "ACL call failed");
        err
    }

    /// `Ok` for success, else the error for `code`.
    pub(crate) fn check(&self, call: &'static str, code: i32) -> Result<(), AclError> {
        if code == codes::ACL_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, code))
        }
    }

    /// Maps the error code of a call with a result.
    pub(crate) fn result<T>(&self, call: &'static str, r: Result<T, i32>) -> Result<T, AclError> {
        r.map_err(|code| self.error(call, code))
    }

    /// Creates an event with ACL `flags`: `aclrtCreateEventExWithFlag`, or
    /// `aclrtCreateEventWithFlag` where the Ex variant is missing.
    pub(crate) fn create_event_raw(&self, flags: u32) -> Result<Handle, AclError> {
        match self.calls.create_event_ex_with_flag(flags) {
            Some(r) => self.result("aclrtCreateEventExWithFlag", r),
            None => self.result(
                "aclrtCreateEventWithFlag",
                self.calls.create_event_with_flag(flags),
            ),
        }
    }

    /// Reports an error kept from a `Drop`, then binds the device to this thread. Every hal
    /// call starts with it.
    pub(crate) fn bind(&self) -> Result<(), AclError> {
        if let Some(err) = self.deferred.lock().take() {
            return Err(err);
        }
        self.bind_only()
    }

    fn bind_only(&self) -> Result<(), AclError> {
        if bind::is_bound(self.uid) {
            return Ok(());
        }
        self.check("aclrtSetDevice", self.calls.set_device(self.ordinal as i32))?;
        bind::set_bound(self.uid);
        tracing::trace!(ordinal = self.ordinal, "ACL device bound to this thread");
        Ok(())
    }

    /// Runs a destroy call from a `Drop`: binds, calls, and keeps a failure for the next call.
    pub(crate) fn release(&self, call: &'static str, f: impl FnOnce(&dyn AclCalls) -> i32) {
        self.release_checked(|| self.check(call, f(self.calls.as_ref())));
    }

    /// Runs a destroy call of another library from a `Drop` (`f` calls it and types its
    /// failure): binds, calls, and keeps a failure for the next call.
    pub(crate) fn release_checked(&self, f: impl FnOnce() -> Result<(), AclError>) {
        if let Err(err) = self.bind_only().and_then(|()| f()) {
            tracing::warn!(%err, "ACL destroy failed in Drop; reported by the next call");
            let mut slot = self.deferred.lock();
            // Keep the first error: it is the one that explains the later ones.
            if slot.is_none() {
                *slot = Some(err);
            }
        }
    }

    /// Notes `nodes` work nodes submitted to `stream`, if it is capturing.
    pub(crate) fn note_work(&self, stream: Handle, nodes: usize) {
        if self.active_captures.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(Ok((ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, model))) =
            self.calls.capture_get_info(stream)
        {
            *self.captures.lock().entry(model).or_insert(0) += nodes;
        }
    }

    /// A capture began; its model (when known) starts with no nodes.
    pub(crate) fn capture_begun(&self, model: Option<Handle>) {
        if let Some(model) = model {
            self.captures.lock().insert(model, 0);
        }
        self.active_captures.fetch_add(1, Ordering::AcqRel);
    }

    /// A capture ended (or failed to): returns the nodes counted for its models.
    pub(crate) fn capture_ended(&self, models: &[Handle]) -> usize {
        let _ = self
            .active_captures
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
        let mut captures = self.captures.lock();
        let mut nodes = 0;
        for model in models {
            if let Some(n) = captures.remove(model) {
                nodes = nodes.max(n);
            }
        }
        nodes
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let result = self.bind_only().and_then(|()| {
            self.check(
                "aclrtResetDevice",
                self.calls.reset_device(self.ordinal as i32),
            )
        });
        bind::forget(self.uid);
        if let Err(err) = result.and(match self.deferred.lock().take() {
            Some(err) => Err(err),
            None => Ok(()),
        }) {
            tracing::warn!(%err, ordinal = self.ordinal, "error while releasing the ACL device");
        }
    }
}

/// One Ascend device through ACL. Cloning gives another handle to the same device.
///
/// Opening calls `aclInit` (a repeated init is not an error) and `aclrtSetDevice`; the device
/// is reset (`aclrtResetDevice`) when the last device, stream, event and graph handle is gone.
#[derive(Clone)]
pub struct AclDevice {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for AclDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclDevice")
            .field("ordinal", &self.shared.ordinal)
            .finish()
    }
}

impl AclDevice {
    /// The aclnn tables of this device's ACL library (loaded at first use; see
    /// [`crate::aclnn`]): what a user operator's native closure calls.
    pub fn aclnn(&self) -> Result<&'static AclnnApi, HalError> {
        self.shared.aclnn()
    }

    /// Wraps an `aclrtStream` created by another library (for example torch_npu's current
    /// stream) as a stream of this device; give it to braid with
    /// [`Device::adopt_stream`](braid_stream_core::Device::adopt_stream). A null handle (ACL's
    /// default stream, which braid already has) is refused.
    ///
    /// # Safety
    /// `raw` is a live stream of this device and stays live as long as the wrapper (for
    /// [`Ownership::Borrowed`]); with [`Ownership::Owned`] nothing else destroys it. Work other
    /// code enqueues on it behind braid's back is outside braid's ordering model until given a
    /// position with [`Stream::note_foreign_work`](braid_stream_core::Stream::note_foreign_work).
    pub unsafe fn wrap_stream(
        &self,
        raw: *mut std::ffi::c_void,
        ownership: Ownership,
    ) -> Result<AclStream, HalError> {
        if raw.is_null() {
            return Err(HalError::InvalidArgument(
                "null aclrtStream: the default stream is the device's default_stream()".into(),
            ));
        }
        Ok(AclStream::foreign(
            self.shared.clone(),
            raw as Handle,
            ownership,
        ))
    }

    /// Wraps an `aclrtEvent` created by another library as an event of this device; give it to
    /// braid with [`Device::adopt_event`](braid_stream_core::Device::adopt_event). A null
    /// handle is refused.
    ///
    /// # Safety
    /// `raw` is a live event of this device, created with `ACL_EVENT_SYNC` (waitable), and
    /// stays live as long as the wrapper (for [`Ownership::Borrowed`]); with
    /// [`Ownership::Owned`] nothing else destroys it.
    pub unsafe fn wrap_event(
        &self,
        raw: *mut std::ffi::c_void,
        ownership: Ownership,
    ) -> Result<AclEvent, HalError> {
        if raw.is_null() {
            return Err(HalError::InvalidArgument("null aclrtEvent".into()));
        }
        Ok(AclEvent::foreign(
            self.shared.clone(),
            raw as Handle,
            ownership,
        ))
    }

    /// Opens device `ordinal` of the library [`AclApi::load`] finds, with the default
    /// configuration.
    pub fn open(ordinal: u32) -> Result<AclDevice, OpenError> {
        Self::open_with(AclApi::load()?, ordinal, AclConfig::default())
    }

    /// Opens device `ordinal` of `api` with `config`.
    pub fn open_with(
        api: &'static AclApi,
        ordinal: u32,
        config: AclConfig,
    ) -> Result<AclDevice, OpenError> {
        Self::with_calls(Arc::new(ApiRef(api)), ordinal, config)
    }

    /// The number of devices `api` reports (`aclInit`, then `aclrtGetDeviceCount`).
    pub fn count(api: &'static AclApi) -> Result<u32, OpenError> {
        Self::count_with(&ApiRef(api))
    }

    /// [`AclDevice::count`] through `calls`.
    pub(crate) fn count_with(calls: &dyn AclCalls) -> Result<u32, OpenError> {
        let code = calls.init();
        if code != codes::ACL_SUCCESS && code != codes::ACL_ERROR_REPEAT_INITIALIZE {
            return Err(AclError::new("aclInit", code, calls.recent_error_message()).into());
        }
        calls.device_count().map_err(|code| {
            AclError::new("aclrtGetDeviceCount", code, calls.recent_error_message()).into()
        })
    }

    pub(crate) fn with_calls(
        calls: Arc<dyn AclCalls>,
        ordinal: u32,
        config: AclConfig,
    ) -> Result<AclDevice, OpenError> {
        let count = Self::count_with(calls.as_ref())?;
        if ordinal >= count {
            return Err(OpenError::NoSuchDevice { ordinal, count });
        }
        let device_id =
            i32::try_from(ordinal).map_err(|_| OpenError::NoSuchDevice { ordinal, count })?;
        let code = calls.set_device(device_id);
        if code != codes::ACL_SUCCESS {
            return Err(AclError::new("aclrtSetDevice", code, calls.recent_error_message()).into());
        }
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        bind::set_bound(uid);
        tracing::debug!(ordinal, ?config, "ACL device opened");
        Ok(AclDevice {
            shared: Arc::new(Shared {
                calls,
                ordinal,
                uid,
                config,
                deferred: Mutex::new(None),
                captures: Mutex::new(HashMap::new()),
                active_captures: AtomicUsize::new(0),
                physical: Mutex::new(HashMap::new()),
                aclnn: OnceLock::new(),
                hccl: OnceLock::new(),
                peers: Mutex::new(HashSet::new()),
            }),
        })
    }

    #[cfg(test)]
    pub(crate) fn shared_uid(&self) -> u64 {
        self.shared.uid
    }

    /// The configuration the device was opened with.
    pub fn config(&self) -> &AclConfig {
        &self.shared.config
    }

    /// The reports of the simulator's sanitizer on this device, rendered as
    /// `braid::sim_race_reports` renders them: braid's `braidSimSanitizerReportCount` /
    /// `braidSimSanitizerReport` extension, which `braid-acl-sim` exports. `Ok(None)` where
    /// the library lacks it (CANN: there is no race detector to ask).
    ///
    /// ACL devices are process-wide, so the reports are the device's, from every handle that
    /// opened it since the last [`AclDevice::clear_sanitizer_reports`].
    pub fn sanitizer_reports(&self) -> Result<Option<Vec<String>>, AclError> {
        let sh = &self.shared;
        let device = sh.ordinal as i32;
        let Some(count) = sh.calls.sanitizer_report_count(device) else {
            return Ok(None);
        };
        let count = sh.result("braidSimSanitizerReportCount", count)?;
        let mut reports = Vec::new();
        for index in 0..count {
            match sh.calls.sanitizer_report(device, index) {
                Some(r) => reports.push(sh.result("braidSimSanitizerReport", r)?),
                None => return Ok(None),
            }
        }
        Ok(Some(reports))
    }

    /// Forgets the simulator's sanitizer reports on this device (braid's
    /// `braidSimClearSanitizerReports` extension); returns whether the library has it (it
    /// does not on CANN, where this does nothing).
    pub fn clear_sanitizer_reports(&self) -> Result<bool, AclError> {
        let sh = &self.shared;
        match sh.calls.clear_sanitizer_reports(sh.ordinal as i32) {
            Some(code) => sh
                .check("braidSimClearSanitizerReports", code)
                .map(|()| true),
            None => Ok(false),
        }
    }

    /// A failed allocation of `size` bytes as a hal error: out of memory becomes
    /// [`HalError::OutOfMemory`], which the allocator's ladder runs on (free and total are
    /// best effort).
    pub(crate) fn alloc_error(&self, err: AclError, size: u64) -> HalError {
        if !err.is_out_of_memory() {
            return err.into();
        }
        let info = self.mem_info_raw().unwrap_or(MemInfo { free: 0, total: 0 });
        tracing::debug!(%err, requested = size, "ACL device out of memory");
        HalError::OutOfMemory {
            requested: size,
            free: info.free,
            total: info.total,
        }
    }

    fn mem_info_raw(&self) -> Result<MemInfo, AclError> {
        let (free, total) = self
            .shared
            .result("aclrtGetMemInfo", self.shared.calls.mem_info(ACL_HBM_MEM))?;
        Ok(MemInfo { free, total })
    }
}

impl hal::Device for AclDevice {
    type B = AclBackend;

    fn ordinal(&self) -> u32 {
        self.shared.ordinal
    }

    fn default_stream(&self) -> Result<AclStream, HalError> {
        self.shared.bind()?;
        Ok(AclStream::default_of(self.shared.clone()))
    }

    fn create_stream(&self, priority: Priority) -> Result<AclStream, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        // ACL priorities run 0 (highest, the default) to 7; braid's 0 is normal, negative is
        // higher. Treated as a hint, as on the hardware (reference §1.5).
        let acl_priority = priority.clamp(0, 7) as u32;
        let handle = match sh
            .calls
            .create_stream_with_config(acl_priority, sh.config.stream_flags)
        {
            Some(r) => sh.result("aclrtCreateStreamWithConfig", r)?,
            None => {
                tracing::debug!("aclrtCreateStreamWithConfig missing; using aclrtCreateStream");
                sh.result("aclrtCreateStream", sh.calls.create_stream())?
            }
        };
        Ok(AclStream::owned(sh.clone(), handle))
    }

    fn create_event(&self, flags: EventFlags) -> Result<AclEvent, HalError> {
        // External events (graph-to-graph record and wait nodes) exist in ACL only as the
        // `ACL_EVENT_RECORD_EXTERNAL` / `ACL_EVENT_WAIT_EXTERNAL` task parameters of recent
        // CANN releases, which braid does not bind yet: refused before any runtime call.
        if flags.external {
            return Err(HalError::Unsupported(
                "external events (record and wait nodes between graphs) on the ACL backend",
            ));
        }
        let sh = &self.shared;
        sh.bind()?;
        // SYNC: waitable and usable in capture; TIME_LINE: timestamps for elapsed time.
        let acl_flags = ACL_EVENT_SYNC | if flags.timing { ACL_EVENT_TIME_LINE } else { 0 };
        let handle = sh.create_event_raw(acl_flags)?;
        Ok(AclEvent::new(sh.clone(), handle))
    }

    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let bytes = usize::try_from(size).map_err(|_| HalError::OutOfMemory {
            requested: size,
            free: 0,
            total: 0,
        })?;
        match sh.calls.malloc(bytes, sh.config.malloc_policy) {
            Ok(ptr) => {
                live::note(sh.library_key(), sh.ordinal, ptr, size);
                Ok(DevicePtr(ptr))
            }
            Err(code) => Err(self.alloc_error(sh.error("aclrtMalloc", code), size)),
        }
    }

    unsafe fn free(&self, ptr: DevicePtr) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        sh.check("aclrtFree", sh.calls.free(ptr.0))?;
        live::forget(sh.library_key(), ptr.0);
        Ok(())
    }

    fn alloc_host(&self, size: u64) -> Result<HostPtr, HalError> {
        let sh = &self.shared;
        sh.bind()?;
        let host_oom = HalError::OutOfMemory {
            requested: size,
            free: 0,
            total: 0,
        };
        let bytes = usize::try_from(size).map_err(|_| host_oom.clone())?;
        match sh.calls.malloc_host(bytes) {
            // A null pointer with success would be a runtime bug; report it as out of memory.
            Ok(addr) => HostPtr::new(addr as *mut u8).ok_or(host_oom),
            Err(code) => {
                let err = sh.error("aclrtMallocHost", code);
                if err.is_out_of_memory() {
                    // ACL does not report free host memory: free/total are unknown (0).
                    tracing::debug!(%err, requested = size, "ACL pinned host memory exhausted");
                    Err(host_oom)
                } else {
                    Err(err.into())
                }
            }
        }
    }

    unsafe fn free_host(&self, ptr: HostPtr) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        Ok(sh.check("aclrtFreeHost", sh.calls.free_host(ptr.addr()))?)
    }

    fn mem_info(&self) -> Result<MemInfo, HalError> {
        self.shared.bind()?;
        Ok(self.mem_info_raw()?)
    }

    /// Known for the memory braid allocated or mapped through this library (on any device of
    /// the process, see `live.rs`): `Some(true)` for this device's, `Some(false)` for
    /// another device's; `None` for anything else.
    fn is_live(&self, range: DeviceSlice) -> Option<bool> {
        let sh = &self.shared;
        let owner = live::owner(sh.library_key(), range.ptr.0, range.len)?;
        Some(owner == sh.ordinal)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        let sh = &self.shared;
        sh.bind()?;
        Ok(sh.check("aclrtSynchronizeDevice", sh.calls.synchronize_device())?)
    }

    /// `aclrtDeviceCanAccessPeer(this, peer)`; `false` for the device itself and where the
    /// library lacks the symbol.
    fn can_access_peer(&self, peer: &Self) -> Result<bool, HalError> {
        let sh = &self.shared;
        if peer.shared.ordinal == sh.ordinal {
            return Ok(false);
        }
        sh.bind()?;
        match sh
            .calls
            .can_access_peer(sh.ordinal as i32, peer.shared.ordinal as i32)
        {
            None => Ok(false),
            Some(r) => Ok(sh.result("aclrtDeviceCanAccessPeer", r)? != 0),
        }
    }

    /// `aclrtDeviceEnablePeerAccess(peer, 0)` with this device bound, once per peer (later
    /// calls succeed without a runtime call). The device itself, a peer ACL says it cannot
    /// access, or a library without the symbol is refused.
    fn enable_peer_access(&self, peer: &Self) -> Result<(), HalError> {
        let sh = &self.shared;
        let peer_ordinal = peer.shared.ordinal;
        if peer_ordinal == sh.ordinal {
            return Err(HalError::InvalidArgument(format!(
                "peer access from ACL device {peer_ordinal} to itself"
            )));
        }
        // Held across the runtime call, so that two threads enabling one peer at once ask ACL
        // once (the model check's `peer_access_enabled_from_two_threads`); only the error
        // slot (taken by the thread binding) is locked under it.
        let mut peers = sh.peers.lock();
        if peers.contains(&peer_ordinal) {
            return Ok(());
        }
        if !self.can_access_peer(peer)? {
            return Err(HalError::InvalidArgument(format!(
                "ACL device {} cannot access ACL device {peer_ordinal} (aclrtDeviceCanAccessPeer)",
                sh.ordinal
            )));
        }
        sh.bind()?;
        let Some(code) = sh.calls.enable_peer_access(peer_ordinal as i32, 0) else {
            return Err(HalError::Unsupported(
                "peer access: this ACL library has no aclrtDeviceEnablePeerAccess",
            ));
        };
        sh.check("aclrtDeviceEnablePeerAccess", code)?;
        peers.insert(peer_ordinal);
        Ok(())
    }

    fn vmm_granularity(&self) -> Option<u64> {
        self.vmm_granularity_impl()
    }

    fn reserve_address(&self, size: u64) -> Result<DevicePtr, HalError> {
        self.reserve_address_impl(size)
    }

    unsafe fn release_address(&self, ptr: DevicePtr) -> Result<(), HalError> {
        self.release_address_impl(ptr)
    }

    fn map_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.map_physical_impl(at, size)
    }

    unsafe fn unmap_physical(&self, at: DevicePtr, size: u64) -> Result<(), HalError> {
        self.unmap_physical_impl(at, size)
    }

    fn set_thread_capture_mode(&self, mode: CaptureMode) -> Result<(), HalError> {
        self.set_thread_capture_mode_impl(mode)
    }

    fn process_id(&self) -> Result<i32, HalError> {
        self.process_id_impl()
    }

    fn ipc_export(&self, range: DeviceSlice, allow_list: bool) -> Result<String, HalError> {
        self.ipc_export_impl(range, allow_list)
    }

    fn ipc_allow_pids(&self, key: &str, pids: &[i32]) -> Result<(), HalError> {
        self.ipc_allow_pids_impl(key, pids)
    }

    fn ipc_import(&self, key: &str) -> Result<(DevicePtr, Option<u64>), HalError> {
        Ok((self.ipc_import_impl(key)?, None))
    }

    unsafe fn ipc_close(&self, key: &str) -> Result<(), HalError> {
        self.ipc_close_impl(key)
    }

    fn create_ipc_event(&self) -> Result<AclEvent, HalError> {
        self.create_ipc_event_impl()
    }

    fn ipc_event_handle(&self, event: &AclEvent) -> Result<[u8; 64], HalError> {
        self.ipc_event_handle_impl(event)
    }

    fn open_ipc_event(&self, handle: &[u8; 64]) -> Result<AclEvent, HalError> {
        self.open_ipc_event_impl(handle)
    }
}
