//! `braid-acl-sim`: a shared library exporting the ACL C symbols braid uses, with ACL's
//! semantics, implemented on braid's simulator ([`braid_backend_sim`]).
//!
//! `braid-backend-acl` loads it through its real loading path (`BRAID_ACL_LIB`, or
//! `AclApi::load_from`) exactly as it loads CANN's `libascendcl.so`, so the whole backend —
//! function table, error mapping, thread binding, capture — runs without an Ascend card. Every
//! symbol of `braid_acl_sys::acl::AclFunctions` (the declaration the backend resolves) is
//! exported with its declared signature, checked at compile time ([`exports`]).
//!
//! What it reproduces:
//! - **Return codes and out parameters** of every function; bad or stale handles are
//!   `ACL_ERROR_RT_INVALID_HANDLE` (107017), never a crash (handles are opaque numbers looked
//!   up in a registry); null out pointers are `ACL_ERROR_INVALID_PARAM`.
//! - **Init and devices**: a repeated `aclInit` returns `ACL_ERROR_REPEAT_INITIALIZE`
//!   (100002); `aclrtSetDevice` binds a device to the calling thread (reference counted), and
//!   calls that need a device fail with `ACL_ERROR_RT_CONTEXT_NULL` (107002) on a thread that
//!   bound none, or `ACL_ERROR_RT_STREAM_CONTEXT` (107003) when the object belongs to another
//!   device than the thread's. (Deliberately strict, so the backend's thread binding is
//!   tested.)
//! - **A node of devices**: `aclrtGetDeviceCount` is the node's size (`BRAID_ACL_SIM_DEVICES`,
//!   default 8); device `i` is device `i` of one simulated node (`registry::devices`), so a
//!   stream may wait on another device's event, and a device-to-device copy between two
//!   devices is a peer copy over their link, refused (107000) unless
//!   `aclrtDeviceEnablePeerAccess` was called from the stream's device (`aclrtDeviceCanAccessPeer`
//!   answers 1 for two devices of the node).
//! - **HCCL** ([`hccl`]): communicators over the node's devices and collectives on ACL streams
//!   on the simulator's collectives, with HCCL's argument checks and result codes.
//! - **Events**: `aclrtStreamWaitEvent` on an event created without `ACL_EVENT_SYNC` fails;
//!   `aclrtEventElapsedTime` needs `ACL_EVENT_TIME_LINE` on both.
//! - **Capture**: `aclmdlRICaptureBegin/GetInfo/End`, `aclmdlRIExecuteAsync`,
//!   `aclmdlRIDestroy`; streams join by waiting on captured events; `aclmdlRICaptureEnd` with a
//!   joined stream that never returned fails with `ACL_ERROR_RT_STREAM_UNJOINED` (107025) and
//!   `aclGetRecentErrMsg` says "capture model contains a stream that was not joined to the
//!   original stream"; a synchronize or query of a capture's own stream or event, or any
//!   blocking call the capture mode forbids (global: every thread; thread-local: the capturing
//!   thread), is `ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC` (107041); work on the default stream
//!   during such a capture is 107031.
//! - **Memory**: device OOM is `ACL_ERROR_RT_DEVICE_OOM` (207018).
//! - **Errors text**: `aclGetRecentErrMsg` returns and clears the calling thread's last
//!   message.
//!
//! - **Virtual memory**: `aclrtReserveMemAddress`, `aclrtMallocPhysical`, `aclrtMapMem` and
//!   their inverses on the simulator's reservations and physical handles, with CANN's
//!   documented constraints (`registry::vmm`).
//! - **Host callbacks** (`reports`): `aclrtSubscribeReport`, `aclrtLaunchCallback`,
//!   `aclrtProcessReport`: the subscribed thread runs a stream's callbacks when the stream
//!   reaches them; a blocking one holds the stream's later work behind a simulator host gate
//!   (`braid_backend_sim::HostGate`); captured ones run at every replay.
//! - **Device-private formats**: `aclnnNpuFormatCast` ([`aclnn::format_exports`]) and the old
//!   path's `Identity` (`client::op_identity`) convert to and from `NC1HWC0`, `FRACTAL_Z`,
//!   `FRACTAL_NZ`, `NDC1HWC0`, `FRACTAL_Z_3D` (`braid_stream_core::ops::Blocked`); every
//!   other operator refuses a private-format operand by name.
//!
//! Not simulated: stream flags and malloc policies (accepted, no effect), and resetting a
//! device does not free its streams. Devices live as long as the process:
//! setting a device again after a reset finds its simulated state (clock, sanitizer) as it
//! was.
//!
//! braid's extensions, which CANN does not have (`braid-backend-acl` resolves them as optional
//! symbols, so on CANN they are simply absent):
//! - `braidSimAclnnLiveObjects` counts live aclnn tensors, scalars, int arrays and executors
//!   (see [`aclnn`], which exports CANN's aclnn operators braid uses on the simulator);
//! - `braidSimSanitizerReportCount`, `braidSimSanitizerReport` and
//!   `braidSimClearSanitizerReports` read and clear the reports of the simulator's
//!   happens-before sanitizer on a device (what `braid::sim_race_reports` reads on the
//!   simulator), so a scenario run through ACL reports the same races as on the simulator.
//!
//! Configuration (environment, read once, at first use):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `BRAID_ACL_SIM_DEVICES` ([`DEVICES_ENV`]) | number of devices of the simulated node, 1 to 64 | 8 |
//! | `BRAID_ACL_SIM_PROFILE` ([`PROFILE_ENV`]) | a profile file (the shipped profiles' format; what `braid calibrate` writes) the devices and their node take | the shipped Atlas 800T A2 profile |
//! | `BRAID_ACL_SIM_CAPACITY` ([`CAPACITY_ENV`]) | memory of each device in bytes, positive | the default profile's: 60.97 GiB (of a 64 GiB 910B) |
//! | `BRAID_ACL_SIM_TIMING_ONLY` ([`TIMING_ONLY_ENV`]) | comma-separated ids of the devices that run timing-only; `none`: none | none |
//! | `BRAID_ACL_SIM_SOC` ([`SOC_ENV`]) | the SoC name `aclrtGetSocName` answers, one of [`SOC_NAMES`] | [`DEFAULT_SOC`] |
//! | `BRAID_ACL_SIM_RACE_REPORT` ([`RACE_REPORT_ENV`]) | a file the sanitizer's reports are written to (JSON) at `aclFinalize` or exit | none |
//! | `BRAID_ACL_SIM_TIMELINE` ([`TIMELINE_ENV`]) | a file the timeline is written to (Chrome Trace Event JSON, for Perfetto) at `aclFinalize` or exit | none (no timeline recorded) |
//! | `BRAID_ACL_SIM_ERROR_LOG` ([`ERROR_LOG_ENV`]) | a file every refused call is appended to, one line each | none |
//! | `BRAID_ACL_SIM_COLLECTIVE_TIMEOUT_MS` ([`COLLECTIVE_TIMEOUT_ENV`]) | how long a synchronization waits for a collective's other ranks, in ms | 5000 |
//! | `HCCL_EXEC_TIMEOUT` ([`HCCL_EXEC_TIMEOUT_ENV`]), CANN's own | the same wait in whole seconds, 0 for no end, when `BRAID_ACL_SIM_COLLECTIVE_TIMEOUT_MS` is unset | — |
//!
//! Unset, a variable takes its default. An invalid value (`BRAID_ACL_SIM_DEVICES=abc`,
//! `BRAID_ACL_SIM_CAPACITY=-1`, a timing-only id that is not a device, or any of them set to
//! nothing, which braid never reads as unset) is never ignored: every call then fails with
//! `ACL_ERROR_INVALID_PARAM` (100000), `aclInit` first, and `aclGetRecentErrMsg` names the
//! variable, its value and what it takes ([`SettingError`]).
//!
//! Device 0 (and every device not named timing-only) runs in the simulator's data mode, so
//! results are real numbers. A timing-only device stores and computes nothing — read-backs are
//! zeros — and models time, memory and ordering only, so model-sized shapes run in
//! milliseconds. No device is timing-only by default, so a program written for an NPU runs
//! unchanged (a collective over four devices, a read-back from device 1); braid's examples and
//! `braid demo --backend acl`, which time model-sized runs on device 1, name it timing-only
//! themselves when the variable is unset
//! (`braid::scenarios::devices::set_acl_sim_node_settings`).
//! Each mode is a simulated node of its own: `HcclCommInitAll` over devices of both modes is
//! refused with `HCCL_E_PARA`, naming `BRAID_ACL_SIM_TIMING_ONLY` and what to set.
//!
//! # Where things are
//!
//! | module | what it holds |
//! |---|---|
//! | [`exports`] | the exported C symbols: each checks its pointers and calls the registry |
//! | `registry` | the simulated runtime's state (devices, handles, captures) and ACL's rules over it, one room per kind of object: the current device, the node and peer access, streams, events, memory, virtual memory, captures and models |
//! | `reports` | host callbacks: subscriptions, reports to the subscribed threads, `aclrtProcessReport`, and the host waits a blocking callback holds |
//! | [`hccl`] | HCCL's exports: communicators and collectives |
//! | `capture` | the join rule of cross-stream capture, checked at `aclmdlRICaptureEnd` |
//! | `kernel` | braid's kernel-launch extension |
//! | `codes`, `errmsg` | return codes; `aclGetRecentErrMsg` per thread |
//! | `settings` | the environment variables above |
#![warn(missing_docs)]

pub mod aclnn;
mod capture;
pub mod client;
mod codes;
mod errmsg;
pub mod exports;
pub mod hccl;
mod outputs;
mod registry;
mod reports;
mod settings;

pub use settings::{
    SettingError, CAPACITY_ENV, COLLECTIVE_TIMEOUT_ENV, DEFAULT_SOC, DEVICES_ENV, ERROR_LOG_ENV,
    HCCL_EXEC_TIMEOUT_ENV, MAX_DEVICES, PROFILE_ENV, RACE_REPORT_ENV, SOC_ENV, SOC_NAMES,
    TIMELINE_ENV, TIMING_ONLY_ENV,
};
