//! Helpers for tests that run the ACL backend on `braid-acl-sim` through the real loading path.
//!
//! `braid-acl-sim` is a dev-dependency of this crate, so cargo builds its cdylib
//! (`libbraid_acl_sim.so`) into `target/<profile>/deps/` before these tests run, next to the
//! test executables. A suite runs over ACL with one line, for example
//! `braid_conformance::conformance_tests!(AclBackend, common::device);`.
#![allow(dead_code)]

use braid_backend_acl::{AclApi, AclBackend, AclComm, AclConfig, AclDevice, AclStream};
use braid_collective::{Communicator, ReduceOp};
use braid_stream_core::hal::{Device as _, Stream as _};
use braid_stream_core::sync::{GlobalMutex, GlobalMutexGuard};
use braid_stream_core::{DType, Device, DevicePtr};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::OnceLock;

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

static DEVICE_LOCK: GlobalMutex<()> = GlobalMutex::new(());

thread_local! {
    static HELD: RefCell<Option<GlobalMutexGuard<'static, ()>>> = const { RefCell::new(None) };
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
            *held = Some(DEVICE_LOCK.lock());
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

/// Opens the hal device `ordinal` of `braid-acl-sim` under the default settings, exclusively
/// for this test (see [`exclusive`]).
pub fn hal_device(ordinal: u32) -> AclDevice {
    exclusive();
    AclDevice::open_with(api(), ordinal, AclConfig::default()).expect("opens")
}

/// Writes `values` (f32) into a fresh buffer of `device` through `stream`.
pub fn upload(device: &AclDevice, stream: &AclStream, values: &[f32]) -> DevicePtr {
    let bytes = braid_stream_core::f32_bytes(values);
    let ptr = device.alloc(bytes.len() as u64).unwrap();
    // SAFETY: `bytes` outlives the synchronize below.
    unsafe { stream.memcpy_h2d(ptr, bytes.as_ptr(), bytes.len() as u64) }.unwrap();
    stream.synchronize().unwrap();
    ptr
}

/// Reads `n` f32 values of `ptr` through `stream`.
pub fn download(stream: &AclStream, ptr: DevicePtr, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    // SAFETY: `bytes` outlives the synchronize below.
    unsafe { stream.memcpy_d2h(bytes.as_mut_ptr(), ptr, bytes.len() as u64) }.unwrap();
    stream.synchronize().unwrap();
    braid_stream_core::f32s_from_bytes(&bytes)
}

/// Two hal devices of `braid-acl-sim` (ordinals 0 and 1), an HCCL communicator of both
/// (`HcclCommInitAll`) and a stream on each: rank `r` is `devices[r]`, `comms[r]`,
/// `streams[r]`.
pub struct TwoRanks {
    // Fields drop in declaration order: streams, communicators, then devices.
    /// A stream of each rank.
    pub streams: [AclStream; 2],
    /// The communicator of each rank.
    pub comms: Vec<AclComm>,
    /// The device of each rank.
    pub devices: [AclDevice; 2],
}

/// Opens devices 0 and 1 (exclusively for this test, see [`exclusive`]), their communicator
/// and a stream on each.
pub fn two_ranks() -> TwoRanks {
    let devices = [hal_device(0), hal_device(1)];
    let comms = AclComm::init_all(&[&devices[0], &devices[1]]).expect("HcclCommInitAll");
    let streams = [
        devices[0].create_stream(0).unwrap(),
        devices[1].create_stream(0).unwrap(),
    ];
    TwoRanks {
        streams,
        comms,
        devices,
    }
}

impl TwoRanks {
    /// Uploads `values(r)` to a fresh buffer of each rank `r`.
    pub fn upload(&self, values: impl Fn(usize) -> Vec<f32>) -> [DevicePtr; 2] {
        [0, 1].map(|r| upload(&self.devices[r], &self.streams[r], &values(r)))
    }

    /// A fresh buffer of `bytes` on each rank.
    pub fn alloc(&self, bytes: u64) -> [DevicePtr; 2] {
        [0, 1].map(|r| self.devices[r].alloc(bytes).unwrap())
    }
}

/// Opens ACL devices `0..n` of `braid-acl-sim` (one node of 8 devices by default, every one
/// computing data, see [`api`]), exclusively for this test: the node factory for the generic
/// suites.
pub fn node(n: u32) -> braid_stream_core::Result<Vec<Device<AclBackend>>> {
    (0..n).map(device).collect()
}

/// Rank `k` adds `k + 1` in each element; every rank gets the sum.
pub fn all_reduce_sums(comms: &[Communicator<AclBackend>]) {
    let bufs: Vec<_> = comms
        .iter()
        .map(|c| {
            let s = c.device().create_stream(0).unwrap();
            let b = c.device().alloc(16).unwrap();
            s.copy_h2d(b.slice(), DType::F32.encode(&[c.rank() as f32 + 1.0; 4]))
                .unwrap();
            (s, b)
        })
        .collect();
    for (c, (s, b)) in comms.iter().zip(&bufs) {
        c.all_reduce(s, b, b, DType::F32, ReduceOp::Sum).unwrap();
    }
    let n = comms.len();
    for (s, b) in &bufs {
        let got = s.copy_d2h(b.slice()).unwrap().wait_f32().unwrap();
        assert_eq!(got, vec![(n * (n + 1) / 2) as f32; 4]);
    }
}
