//! braid: a multi-stream runtime for accelerators.
//!
//! This facade re-exports the workspace's crates and picks a default backend by cargo feature:
//!
//! | feature | backend | status |
//! |---|---|---|
//! | `sim` (default) | [`sim`]: the simulated device | available |
//! | `acl` | Huawei Ascend through a run-time loaded `libascendcl.so` | arrives with its issue |
//!
//! The front types ([`Device`], [`Stream`], [`Event`], [`Graph`]) are generic over the backend;
//! [`DefaultBackend`] names the one the features select.
//!
//! ```
//! use braid::{Kernel, sim};
//! let device = braid::sim_device(sim::SimConfig::new())?;
//! let side = device.create_stream(0)?;
//! let buf = device.alloc(16)?;
//! device.default_stream().launch(&Kernel::Fill { dst: buf.slice(), value: 2.0 })?;
//! side.wait_stream(&device.default_stream())?;
//! let values = side.copy_d2h(buf.slice())?.wait_f32()?;
//! assert_eq!(values, vec![2.0; 4]);
//! # Ok::<(), braid::Error>(())
//! ```
#![warn(missing_docs)]

pub use braid_allocator as allocator;
pub use braid_graph_capture as graph_capture;
pub use braid_stream_core as core;
pub use braid_stream_core::*;

#[cfg(feature = "sim")]
pub use braid_backend_sim as sim;

#[cfg(feature = "sim")]
pub mod scenarios;

/// The backend the enabled features select.
#[cfg(feature = "sim")]
pub type DefaultBackend = braid_backend_sim::SimBackend;

/// Opens a simulated device with `config`.
#[cfg(feature = "sim")]
pub fn sim_device(
    config: braid_backend_sim::SimConfig,
) -> Result<Device<braid_backend_sim::SimBackend>> {
    Device::new(braid_backend_sim::SimDevice::new(config))
}
