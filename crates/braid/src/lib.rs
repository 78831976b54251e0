//! braid: a multi-stream runtime for accelerators.
//!
//! This facade re-exports the workspace's crates, so one dependency gives all of braid:
//!
//! | path | crate | what is there |
//! |---|---|---|
//! | `braid::*`, [`core`] | `braid-stream-core` | devices, streams, events, graphs, kernels, user operators, data types, the happens-before model, the backend interface ([`hal`]) |
//! | [`allocator`] | `braid-allocator` | the caching device allocator, private pools, the pinned host allocator |
//! | [`graph_capture`] | `braid-graph-capture` | capture sessions, graph pools, `GraphRunner` |
//! | [`collective`] | `braid-collective` | communicators over several devices, HCCL's collectives as stream operators |
//! | [`trace`] | `braid-trace` | PyTorch memory snapshots: replay through the allocator (on the simulator with feature `sim`), export for pytorch.org/memory_viz |
//! | `sim` | `braid-backend-sim` | the simulated device (feature `sim`) |
//! | `acl` | `braid-backend-acl` | Huawei Ascend through ACL (feature `acl`) |
//! | `graph_memory` | this crate | graph memory known before capture: a dry run of a capture closure on a timing-only simulated device predicts a graph pool's bytes (feature `sim`) |
//! | `scenarios` | this crate | the seed scenarios behind `braid demo` and the examples (feature `sim`) |
//! | `guide` | `docs/guide/` | the user guide, a chapter per module, its code blocks tested as doctests (feature `sim`) |
//! | [`Report`] | this crate | the error for `main` to return: the message and its causes, one per line |
//!
//! Start with the guide (`guide`, also the repository's `docs/guide/`) and the repository's
//! `ARCHITECTURE.md`. The crate picks a default backend by cargo feature:
//!
//! | feature | backend | status |
//! |---|---|---|
//! | `sim` (default) | `sim`: the simulated device (and `trace::sim`, trace replay on it) | available |
//! | `acl` | `acl`: Huawei Ascend through a run-time loaded `libascendcl.so` (`braid_backend_acl`) | available; verified through `braid-acl-sim` only |
//! | `acl-sim` | `acl`, plus `braid-acl-sim` built beside the program (ACL's C API on the simulator) | available |
//!
//! The feature `tcp` (default) adds `collective::TcpRootInfoTransport`, the ready-made
//! root-info transport between processes, over tokio; without it neither tokio nor
//! async-trait is compiled (the `braid` binary leaves it off).
//!
//! Items that need a feature say so in these docs when they are built as docs.rs builds
//! them (every feature, with `--cfg docsrs` on a nightly toolchain); locally, in braid's
//! workspace, `cargo doc -p braid --all-features --no-deps --open` documents every item
//! on a stable toolchain (the guide's index, `docs/guide/README.md`, gives the command for a project of your
//! own, where cargo refuses `--features` on a dependency named with `-p`).
//!
//! The front types ([`Device`], [`Stream`], [`Event`], [`Graph`]) are generic over the backend;
//! `DefaultBackend` names the one the features select: ACL when `acl` is on (also alongside
//! `sim`), else the simulator. With `acl`, `acl_device` opens an Ascend device of the
//! library found from `$BRAID_ACL_LIB`, `$ASCEND_HOME_PATH`, `$ASCEND_TOOLKIT_HOME` or the
//! loader path, and where none of the variables is set and the loader path has none, of
//! `libbraid_acl_sim.so` beside the running executable (a variable that is set but leads to
//! no library is an error naming it): the feature `acl-sim` has cargo build it there, so a program of your own runs
//! through the ACL path on the simulator with no setting, as `braid demo --backend acl` and
//! the examples (`scenarios::devices`) do. Elsewhere, `braid acl-sim install --dir DIR`
//! copies the library out of a braid build and prints the `BRAID_ACL_LIB=` line.
//!
//! ```
//! # #[cfg(feature = "sim")] {
//! use braid::{Kernel, sim};
//! let device = braid::sim_device(sim::SimConfig::new())?;
//! let side = device.create_stream(0)?;
//! let buf = device.alloc(16)?;
//! device.default_stream().launch(&Kernel::Fill { dst: buf.slice(), value: 2.0 })?;
//! side.wait_stream(&device.default_stream())?;
//! let values = side.copy_d2h(buf.slice())?.wait_f32()?;
//! assert_eq!(values, vec![2.0; 4]);
//! # }
//! # Ok::<(), braid::StreamError>(())
//! ```
#![warn(missing_docs)]
// Doctests (the README's blocks among them) fail on any warning, unused imports included.
#![doc(test(attr(deny(warnings))))]
// docs.rs builds with every feature and `--cfg docsrs` (`[package.metadata.docs.rs]`):
// items behind a feature are then marked with it.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The caching device allocator, private pools and the pinned host allocator (crate
/// `braid-allocator`).
#[doc(inline)]
pub use braid_allocator as allocator;
/// Communicators over several devices and HCCL's collectives as stream operators (crate
/// `braid-collective`).
#[doc(inline)]
pub use braid_collective as collective;
/// Capture sessions, graph pools and `GraphRunner` (crate `braid-graph-capture`).
#[doc(inline)]
pub use braid_graph_capture as graph_capture;
/// Devices, streams, events, graphs, kernels, user operators, the happens-before model and the
/// backend interface (crate `braid-stream-core`, whose items are also at the root of `braid`).
#[doc(inline)]
pub use braid_stream_core as core;
pub use braid_stream_core::*;
/// PyTorch memory snapshots: replay through the allocator and export for PyTorch's memory
/// viewer (crate `braid-trace`).
#[doc(inline)]
pub use braid_trace as trace;

/// The simulated device: deterministic, models time and memory, computes real numbers, and
/// reports races between streams (crate `braid-backend-sim`).
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
#[doc(inline)]
pub use braid_backend_sim as sim;

pub mod report;
pub use report::Report;

#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod graph_memory;

#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod scenarios;

#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod guide;

/// The repository's README: every Rust code block in it compiles and runs as a doctest of this
/// crate (`cargo test -p braid --doc`).
#[cfg(all(doctest, feature = "sim"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// Huawei Ascend through ACL, `libascendcl.so` loaded at run time (crate `braid-backend-acl`).
#[cfg(feature = "acl")]
#[cfg_attr(docsrs, doc(cfg(feature = "acl")))]
#[doc(inline)]
pub use braid_backend_acl as acl;

/// The backend the enabled features select.
#[cfg(all(feature = "sim", not(feature = "acl")))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "sim", not(feature = "acl")))))]
pub type DefaultBackend = braid_backend_sim::SimBackend;

/// The backend the enabled features select (`acl` takes precedence over `sim`).
#[cfg(feature = "acl")]
#[cfg_attr(docsrs, doc(cfg(feature = "acl")))]
pub type DefaultBackend = braid_backend_acl::AclBackend;

/// Opens Ascend device `ordinal` through ACL (`aclInit`, `aclrtSetDevice`), loading the library
/// as `braid demo --backend acl` does ([`braid_backend_acl::AclApi::load_or_sim`]): CANN when
/// it is configured or installed, else `libbraid_acl_sim.so` beside the running executable,
/// where cargo builds it with the feature `acl-sim`. A `$ASCEND_HOME_PATH` (or
/// `$ASCEND_TOOLKIT_HOME`) without the library is an error naming it, never the simulator. A missing library is `StreamError::Backend` with
/// `HalError::Native { name: "BRAID_ACL_LIBRARY_UNAVAILABLE", .. }` listing what was tried and
/// how to get braid-acl-sim.
#[cfg(feature = "acl")]
#[cfg_attr(docsrs, doc(cfg(feature = "acl")))]
pub fn acl_device(ordinal: u32) -> Result<Device<braid_backend_acl::AclBackend>> {
    use braid_backend_acl::{AclApi, AclConfig, AclDevice, OpenError};
    let api = AclApi::load_or_sim().map_err(|e| hal::HalError::from(OpenError::Load(e)))?;
    let hal =
        AclDevice::open_with(api, ordinal, AclConfig::default()).map_err(hal::HalError::from)?;
    Device::new(hal)
}

/// The sanitizer reports of an ACL device on `braid-acl-sim` (the simulator's sanitizer behind
/// the ACL API, through braid's `braidSimSanitizerReport*` extension), rendered as
/// `sim_race_reports` renders them, for scenario outcomes. `None` on CANN, which has no race
/// detector to ask, or when the extension fails.
///
/// ACL devices are process-wide: these are the device's reports since it was last cleared
/// ([`braid_backend_acl::AclDevice::clear_sanitizer_reports`], which
/// `scenarios::devices::acl` calls when it opens a device).
#[cfg(feature = "acl")]
#[cfg_attr(docsrs, doc(cfg(feature = "acl")))]
pub fn acl_race_reports(device: &Device<braid_backend_acl::AclBackend>) -> Option<Vec<String>> {
    device.hal().sanitizer_reports().ok().flatten()
}

/// The simulated device's sanitizer reports, rendered as text (for scenario outcomes).
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub fn sim_race_reports(device: &Device<braid_backend_sim::SimBackend>) -> Option<Vec<String>> {
    Some(
        device
            .hal()
            .sanitizer_reports()
            .iter()
            .map(|r| r.to_string())
            .collect(),
    )
}

/// Opens a simulated device with `config`.
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub fn sim_device(
    config: braid_backend_sim::SimConfig,
) -> Result<Device<braid_backend_sim::SimBackend>> {
    Device::new(braid_backend_sim::SimDevice::new(config))
}
