//! braid's Ascend backend: the hal of [`braid_stream_core::hal`] over ACL (`libascendcl.so`),
//! loaded at run time the cudarc way.
//!
//! - **Loading** ([`api`]): one table of function pointers ([`AclApi`], over
//!   `braid_acl_sys::acl::AclFunctions`: the ACL API is declared once, in `braid-acl-sys`, for
//!   this crate and for `braid-acl-sim`) resolved once per library, found from
//!   `$BRAID_ACL_LIB`, else `lib64/libascendcl.so` under `$ASCEND_HOME_PATH` /
//!   `$ASCEND_TOOLKIT_HOME`, then the loader path ([`LIBRARIES`]). A missing library or
//!   required symbol is a typed [`LoadError`] listing every path tried with the loader's own
//!   reason; a library named by `$BRAID_ACL_LIB` that fails is an error naming it, never a
//!   fall-through. Optional symbols ([`SYMBOLS`] marks them) are `Option`s with fallbacks.
//!   [`is_available`] tells tests and benches whether to run. The crate builds and tests
//!   everywhere: nothing links against CANN.
//! - **The hal** ([`AclBackend`]): [`AclDevice`] (`aclInit`, `aclrtSetDevice` /
//!   `aclrtResetDevice`, `aclrtGetMemInfo(ACL_HBM_MEM)`, `aclrtMalloc` huge-first /
//!   `aclrtFree`), [`AclStream`] (`aclrtCreateStreamWithConfig` with
//!   `ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC` and the priority, falling back to
//!   `aclrtCreateStream`; async copies and memsets; synchronize with timeout where available;
//!   query; wait), [`AclEvent`] (`aclrtCreateEventExWithFlag` + `ACL_EVENT_SYNC`, plus
//!   `ACL_EVENT_TIME_LINE` for timing), [`AclGraph`] (`aclmdlRICaptureBegin` / `GetInfo` /
//!   `End`, `aclmdlRIExecuteAsync`, `aclmdlRIDestroy`; braid's capture modes map to global /
//!   thread-local / relaxed).
//! - **Threads and several devices**: ACL's current device is per thread; every call binds
//!   its device first (`aclrtSetDevice` on a thread where another device, or none, is the
//!   bound one, as torch_npu's `SetDevice` does), as cudarc binds its context, so handles of
//!   several devices can be used in any order from any thread. ACL counts each
//!   `aclrtSetDevice`; the device is released at process exit. Peer access: hal
//!   `Device::can_access_peer` / `enable_peer_access` are `aclrtDeviceCanAccessPeer` /
//!   `aclrtDeviceEnablePeerAccess(peer, 0)` (called once per peer).
//! - **Collectives** ([`hccl`]): `libhccl.so` loaded like ACL (`$BRAID_HCCL_LIB`, CANN homes,
//!   loader path; from `braid-acl-sim` when that is the ACL library); [`AclComm`]
//!   (`HcclCommInitAll`, `HcclGetRootInfo` / `HcclCommInitRootInfo`, destroyed on drop) and
//!   `CollectiveBackend::launch_collective` mapping a `CollectiveCall` to `HcclAllReduce` and
//!   friends; failures carry the `HcclResult` name and `HcclGetErrorString`'s text.
//! - **Errors** ([`AclError`]): the ACL number, its name ([`code_name`]) and
//!   `aclGetRecentErrMsg()`'s text, as [`HalError::Native`](braid_stream_core::hal::HalError);
//!   device OOM (207018, 207001, 200000) from `aclrtMalloc` is `HalError::OutOfMemory` so the
//!   allocator's OOM path runs. Errors of destroy calls made in `Drop` are kept and returned by
//!   the device's next call.
//! - **Kernels** ([`aclnn`]): braid's backend-neutral [`Kernel`](braid_stream_core::Kernel)s
//!   run as CANN aclnn operators in their data type (f32, f16, bf16), through the two-phase
//!   API: [`hal::Stream::prepare`](braid_stream_core::hal::Stream::prepare) is the operator's
//!   `GetWorkspaceSize`, the front layer takes the workspace it asks for in stream order (from
//!   the caching allocator on the launching stream), then
//!   [`hal::Stream::launch_prepared`](braid_stream_core::hal::Stream::launch_prepared)
//!   enqueues it. aclnn is loaded at the first launch (`libnnopbase.so`, `libopapi*.so`);
//!   `Kernel::Busy` has no operator ([`aclnn::BUSY_UNSUPPORTED`]).
//! - **The simulator behind the API**: `braid-acl-sim` builds `libbraid_acl_sim.so`
//!   ([`SIM_LIB_NAME`]), which exports the same API (aclnn included) on braid's simulator plus
//!   braid's extensions (the sanitizer's reports through
//!   [`AclDevice::sanitizer_reports`]). Point `BRAID_ACL_LIB` at it, or use
//!   [`AclApi::load_or_sim`], which falls back to it when nothing is configured and it was
//!   built next to the running executable ([`sim_library_candidates`]);
//!   [`AclApi::is_braid_acl_sim`] tells which library runs.
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | [`api`] | finding, opening and resolving the library ([`AclApi`]) |
//! | `calls` | the ACL calls the hal makes, as a trait over Rust values (mocked in unit tests) |
//! | `device`, `stream`, `event`, `graph`, `vmm` | the hal types and their virtual-memory methods |
//! | `bind` | per-thread device binding |
//! | `live` | which device of the process owns an address (`is_live`) |
//! | [`hccl`] | HCCL: loading ([`HcclApi`]), communicators ([`AclComm`]), collectives on streams |
//! | `native` | user operators' native bodies ([`native_op`]); wrapping foreign streams and events |
//! | [`error`], [`ffi`] | ACL codes, names and [`AclError`]; the C declarations from `braid-acl-sys` |
//!
//! ```no_run
//! use braid_backend_acl::{AclBackend, AclDevice};
//! use braid_stream_core::Device;
//! let device: Device<AclBackend> = Device::new(AclDevice::open(0)?)?;
//! let stream = device.create_stream(0)?;
//! let buf = device.alloc(1 << 20)?;
//! stream.memset(buf.slice(), 0)?;
//! stream.synchronize()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod aclnn;
pub mod api;
mod bind;
mod calls;
mod capture_mode;
mod device;
pub mod error;
mod event;
pub mod ffi;
mod graph;
pub mod hccl;
mod ipc;
mod live;
mod native;
mod stream;
mod vmm;

#[cfg(all(test, feature = "model-check"))]
mod model_check;
#[cfg(test)]
mod peer_tests;
#[cfg(test)]
mod tests;

pub use api::{
    is_available, load, sim_library_candidates, AclApi, LoadError, LIBRARIES, SIM_LIB_NAME, SYMBOLS,
};
pub use braid_acl_sys as sys;
pub use braid_acl_sys::acl::{LIB_ENV, LIB_NAME};
pub use braid_acl_sys::Symbol;
pub use device::{
    AclConfig, AclDevice, OpenError, ACLNN_LOAD_FAILED_CODE, HCCL_LOAD_FAILED_CODE,
    LOAD_FAILED_CODE,
};
pub use error::{code_name, codes, is_out_of_memory, AclError};
pub use event::AclEvent;
pub use graph::AclGraph;
pub use hccl::{AclComm, HcclApi};
pub use native::{native_op, NativeOpFn, Ownership};
pub use stream::{capture_mode_number, AclStream, CAPTURE_UNSUPPORTED};

/// The ACL backend: ties [`AclDevice`], [`AclStream`], [`AclEvent`] and [`AclGraph`] together.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct AclBackend;

impl braid_stream_core::hal::Backend for AclBackend {
    type Device = AclDevice;
    type Stream = AclStream;
    type Event = AclEvent;
    type Graph = AclGraph;
    type Prepared = aclnn::AclPrepared;
    type OpBody = NativeOpFn;
    const NAME: &'static str = "acl";
}
