//! Helpers for tests that run the ACL backend on `braid-acl-sim` through the real loading path.
//!
//! `braid-acl-sim` is a dev-dependency of this crate, so cargo builds its cdylib
//! (`libbraid_acl_sim.so`) into `target/<profile>/deps/` before these tests run, next to the
//! test executables. A suite runs over ACL with one line, for example
//! `braid_conformance::conformance_tests!(AclBackend, common::device);`.
#![allow(dead_code)]

use braid_backend_acl::{AclApi, AclBackend, AclConfig, AclDevice};
use braid_stream_core::Device;
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// File name of the simulated ACL library.
pub const SIM_LIB: &str = "libbraid_acl_sim.so";

/// The built `braid-acl-sim` library: next to the test executable (`deps/`) or one level up.
pub fn sim_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    let deps = exe.parent().expect("the executable is in a directory");
    [deps.join(SIM_LIB), deps.join("..").join(SIM_LIB)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{SIM_LIB} not found next to {} (braid-acl-sim is a dev-dependency and should have been built)",
                exe.display()
            )
        })
}

/// The function table of `braid-acl-sim`, loaded through the backend's loader under its
/// default settings (every simulated device computes data).
pub fn api() -> &'static AclApi {
    static API: OnceLock<&'static AclApi> = OnceLock::new();
    API.get_or_init(|| {
        AclApi::load_from(sim_library()).expect("braid-acl-sim loads with every required symbol")
    })
}

static DEVICE_LOCK: Mutex<()> = Mutex::new(());

thread_local! {
    static HELD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// Gives this test thread exclusive use of the simulated devices until it ends.
///
/// ACL devices are process-wide (as on hardware), and a global-mode capture forbids blocking
/// calls on every thread of its device: tests that open devices therefore run one at a time.
/// The guard lives in a thread local and is released when the test's thread exits.
pub fn exclusive() {
    HELD.with(|held| {
        let mut held = held.borrow_mut();
        if held.is_none() {
            *held = Some(DEVICE_LOCK.lock().unwrap_or_else(|p| p.into_inner()));
        }
    });
}

/// Opens ACL device `ordinal` of `braid-acl-sim` (exclusively for this test, see
/// [`exclusive`]): the device factory for the generic suites.
pub fn device(ordinal: u32) -> braid_stream_core::Result<Device<AclBackend>> {
    exclusive();
    let hal = AclDevice::open_with(api(), ordinal, AclConfig::default())
        .map_err(braid_stream_core::hal::HalError::from)?;
    Device::new(hal)
}

/// Opens ACL devices `0..n` of `braid-acl-sim` (one node of 8 devices by default, every one
/// computing data, see [`api`]), exclusively for this test: the node factory for the generic
/// suites.
pub fn node(n: u32) -> braid_stream_core::Result<Vec<Device<AclBackend>>> {
    (0..n).map(device).collect()
}
