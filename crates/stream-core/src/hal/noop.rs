//! A backend that runs nothing, as wgpu-hal's `noop`: [`NoopBackend`] implements every trait
//! of the hal, the collective extension included, and every call succeeds at once. It is for
//! tests of code above the hal (the front layer, the allocator, `braid-collective`, a
//! downstream library) that need a backend but no device.
//!
//! What it does:
//! - each device hands out addresses from its own base (`(ordinal + 1) << 32`), never reused,
//!   so memory of two devices never overlaps; `mem_info` reports 1 GiB free of 1 GiB;
//! - copies and memsets move nothing (a readback reads zeros); streams, events and graphs
//!   are always complete;
//! - every kernel, user operator and collective part launched on a device's streams is
//!   noted, in launch order, in the device's [`NoopDevice::launched`] list; a user operator's
//!   body (a plain closure) is called once at its launch;
//! - a communicator's launches can be made to fail ([`NoopComm::refuse_launches`]), and a
//!   root info is refused unless [`NoopBackend`] made it.
//!
//! ```
//! use braid_stream_core::hal::noop::{Launched, NoopBackend, NoopDevice};
//! use braid_stream_core::{Device, Kernel};
//! let device: Device<NoopBackend> = Device::new(NoopDevice::new(0))?;
//! let buf = device.alloc(64)?;
//! device.default_stream().launch(&Kernel::Fill { dst: buf.slice(), value: 1.0 })?;
//! assert!(matches!(&device.hal().launched()[..], [Launched::Kernel { label, .. }] if label == "fill"));
//! # Ok::<(), braid_stream_core::StreamError>(())
//! ```

use super::{Backend, CollectiveBackend, Comm, HalError, Operator};
use crate::collective::{CollectiveCall, RootInfo, ROOT_INFO_BYTES};
use crate::kernel::TypedKernel;
use crate::sync::Mutex;
use crate::types::{
    CaptureMode, CaptureStatus, DevicePtr, DeviceSlice, EventFlags, MemInfo, Priority,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The backend that runs nothing (see the [module](self)).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct NoopBackend;

impl Backend for NoopBackend {
    type Device = NoopDevice;
    type Stream = NoopStream;
    type Event = NoopEvent;
    type Graph = NoopGraph;
    type Prepared = TypedKernel;
    type OpBody = dyn Fn() + Send + Sync;
    const NAME: &'static str = "noop";
}

/// What a stream of a [`NoopDevice`] was given to launch.
#[derive(Clone, PartialEq, Debug)]
pub enum Launched {
    /// A built-in kernel.
    Kernel {
        /// The kernel.
        kernel: TypedKernel,
        /// Its label.
        label: String,
    },
    /// A user operator.
    Operator {
        /// Its name.
        name: Arc<str>,
    },
    /// A rank's part of a collective.
    Collective {
        /// The rank of the communicator it was launched with.
        rank: u32,
        /// The call.
        call: CollectiveCall,
        /// Its label.
        label: String,
    },
}

/// The launches of one device's streams, in order.
type Log = Arc<Mutex<Vec<Launched>>>;

fn note(log: &Log, launched: Launched) {
    log.lock().push(launched);
}

/// A device of the [`NoopBackend`].
#[derive(Debug)]
pub struct NoopDevice {
    ordinal: u32,
    next: AtomicU64,
    log: Log,
}

impl NoopDevice {
    /// Device `ordinal`: its addresses start at `(ordinal + 1) << 32`.
    pub fn new(ordinal: u32) -> NoopDevice {
        NoopDevice {
            ordinal,
            next: AtomicU64::new((u64::from(ordinal) + 1) << 32),
            log: Log::default(),
        }
    }

    /// Everything launched on this device's streams so far, in launch order.
    pub fn launched(&self) -> Vec<Launched> {
        self.log.lock().clone()
    }
}

/// A stream of a [`NoopDevice`]: notes its launches in the device's list.
#[derive(Debug)]
pub struct NoopStream {
    log: Log,
}

/// An event of the [`NoopBackend`]: always complete.
#[derive(Debug)]
pub struct NoopEvent;

/// A graph of the [`NoopBackend`]: captures nothing, replays nothing.
#[derive(Debug)]
pub struct NoopGraph;

/// A communicator rank of the [`NoopBackend`].
#[derive(Debug)]
pub struct NoopComm {
    rank: u32,
    ranks: u32,
    refuse: AtomicBool,
}

impl NoopComm {
    fn new(rank: u32, ranks: u32) -> NoopComm {
        NoopComm {
            rank,
            ranks,
            refuse: AtomicBool::new(false),
        }
    }

    /// Makes this rank's later launches fail with [`HalError::Unsupported`] (`true`) or
    /// succeed again (`false`), to test what a failed backend call leaves behind.
    pub fn refuse_launches(&self, refuse: bool) {
        self.refuse.store(refuse, Ordering::Relaxed);
    }
}

impl Comm for NoopComm {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn ranks(&self) -> u32 {
        self.ranks
    }
}

/// The first byte of the root infos [`NoopBackend`] makes.
const ROOT_MAGIC: u8 = 0xB7;

impl CollectiveBackend for NoopBackend {
    type Comm = NoopComm;
    const ALWAYS_CHECKS_MISMATCH: bool = false;

    fn init_all(devices: &[&NoopDevice]) -> Result<Vec<NoopComm>, HalError> {
        let ranks = u32::try_from(devices.len())
            .map_err(|_| HalError::InvalidArgument("too many devices".into()))?;
        Ok((0..ranks).map(|rank| NoopComm::new(rank, ranks)).collect())
    }

    fn root_info(_device: &NoopDevice) -> Result<RootInfo, HalError> {
        let mut bytes = [0; ROOT_INFO_BYTES];
        bytes[0] = ROOT_MAGIC;
        Ok(RootInfo(Box::new(bytes)))
    }

    fn init_root_info(
        _device: &NoopDevice,
        ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<NoopComm, HalError> {
        if info.as_bytes()[0] != ROOT_MAGIC {
            return Err(HalError::InvalidArgument(
                "not a root info of the noop backend".into(),
            ));
        }
        if rank >= ranks {
            return Err(HalError::InvalidArgument(format!(
                "rank {rank} is out of range for {ranks} ranks"
            )));
        }
        Ok(NoopComm::new(rank, ranks))
    }

    fn launch_collective(
        stream: &NoopStream,
        comm: &NoopComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        if comm.refuse.load(Ordering::Relaxed) {
            return Err(HalError::Unsupported(
                "launches refused (NoopComm::refuse_launches)",
            ));
        }
        note(
            &stream.log,
            Launched::Collective {
                rank: comm.rank,
                call: call.clone(),
                label: label.to_string(),
            },
        );
        Ok(())
    }
}

impl super::Device for NoopDevice {
    type B = NoopBackend;

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn default_stream(&self) -> Result<NoopStream, HalError> {
        self.create_stream(0)
    }

    fn create_stream(&self, _priority: Priority) -> Result<NoopStream, HalError> {
        Ok(NoopStream {
            log: self.log.clone(),
        })
    }

    fn create_event(&self, _flags: EventFlags) -> Result<NoopEvent, HalError> {
        Ok(NoopEvent)
    }

    fn alloc(&self, size: u64) -> Result<DevicePtr, HalError> {
        Ok(DevicePtr(
            self.next.fetch_add(size.max(1), Ordering::Relaxed),
        ))
    }

    unsafe fn free(&self, _ptr: DevicePtr) -> Result<(), HalError> {
        Ok(())
    }

    fn mem_info(&self) -> Result<MemInfo, HalError> {
        Ok(MemInfo {
            free: 1 << 30,
            total: 1 << 30,
        })
    }

    fn synchronize(&self) -> Result<(), HalError> {
        Ok(())
    }
}

impl super::Stream for NoopStream {
    type B = NoopBackend;

    fn prepare(&self, kernel: &TypedKernel) -> Result<TypedKernel, HalError> {
        Ok(kernel.clone())
    }

    fn launch_prepared(
        &self,
        prepared: TypedKernel,
        _workspace: Option<DeviceSlice>,
        label: &str,
    ) -> Result<(), HalError> {
        note(
            &self.log,
            Launched::Kernel {
                kernel: prepared,
                label: label.to_string(),
            },
        );
        Ok(())
    }

    fn launch_operator(&self, op: &Operator<'_, NoopBackend>) -> Result<(), HalError> {
        if let Some(body) = op.body {
            body();
        }
        note(
            &self.log,
            Launched::Operator {
                name: op.name.clone(),
            },
        );
        Ok(())
    }

    unsafe fn memcpy_h2d(
        &self,
        _dst: DevicePtr,
        _src: *const u8,
        _len: u64,
    ) -> Result<(), HalError> {
        Ok(())
    }

    unsafe fn memcpy_d2h(&self, _dst: *mut u8, _src: DevicePtr, _len: u64) -> Result<(), HalError> {
        Ok(())
    }

    fn memcpy_d2d(&self, _dst: DevicePtr, _src: DevicePtr, _len: u64) -> Result<(), HalError> {
        Ok(())
    }

    fn memset(&self, _dst: DevicePtr, _value: u8, _len: u64) -> Result<(), HalError> {
        Ok(())
    }

    fn record(&self, _event: &NoopEvent) -> Result<(), HalError> {
        Ok(())
    }

    fn wait(&self, _event: &NoopEvent) -> Result<(), HalError> {
        Ok(())
    }

    fn synchronize(&self) -> Result<(), HalError> {
        Ok(())
    }

    fn query(&self) -> Result<bool, HalError> {
        Ok(true)
    }

    fn begin_capture(&self, _mode: CaptureMode) -> Result<(), HalError> {
        Ok(())
    }

    fn end_capture(&self) -> Result<NoopGraph, HalError> {
        Ok(NoopGraph)
    }

    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        Ok(CaptureStatus::None)
    }
}

impl super::Event for NoopEvent {
    type B = NoopBackend;

    fn query(&self) -> Result<bool, HalError> {
        Ok(true)
    }

    fn synchronize(&self) -> Result<(), HalError> {
        Ok(())
    }

    fn elapsed_ms(&self, _end: &Self) -> Result<f32, HalError> {
        Ok(0.0)
    }
}

impl super::Graph for NoopGraph {
    type B = NoopBackend;

    fn launch(&self, _stream: &NoopStream) -> Result<(), HalError> {
        Ok(())
    }

    fn node_count(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{CollectiveOp, ReduceOp};
    use crate::hal::{Device as _, Stream as _};
    use crate::DType;

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<NoopDevice>();
        check::<NoopStream>();
        check::<NoopEvent>();
        check::<NoopGraph>();
        check::<NoopComm>();
    }

    #[test]
    fn devices_hand_out_disjoint_addresses() {
        let (a, b) = (NoopDevice::new(0), NoopDevice::new(1));
        let (x, y) = (a.alloc(16).unwrap(), a.alloc(0).unwrap());
        assert_eq!((x.0, y.0), (1 << 32, (1 << 32) + 16));
        assert_eq!(b.alloc(8).unwrap().0, 2 << 32);
        assert_eq!(b.alloc(8).unwrap().0, (2 << 32) + 8);
    }

    #[test]
    fn launches_are_noted_in_order_and_refused_on_demand() {
        let device = NoopDevice::new(0);
        let stream = device.create_stream(0).unwrap();
        let called = Arc::new(AtomicBool::new(false));
        let seen = called.clone();
        let body: Arc<dyn Fn() + Send + Sync> =
            Arc::new(move || seen.store(true, Ordering::Relaxed));
        let name: Arc<str> = Arc::from("op");
        stream
            .launch_operator(&Operator {
                name: &name,
                ranges: &[],
                dtype: DType::F32,
                cost: super::super::OpCost::Fixed { ns: 0 },
                body: Some(&body),
            })
            .unwrap();
        assert!(called.load(Ordering::Relaxed));
        let comms = NoopBackend::init_all(&[&device, &device]).unwrap();
        assert_eq!((comms[1].rank(), comms[1].ranks()), (1, 2));
        let call = CollectiveCall {
            op: CollectiveOp::AllReduce(ReduceOp::Sum),
            send: DevicePtr(0),
            recv: DevicePtr(0),
            count: 1,
            dtype: DType::F32,
            v: None,
        };
        comms[1].refuse_launches(true);
        assert!(NoopBackend::launch_collective(&stream, &comms[1], &call, "x").is_err());
        comms[1].refuse_launches(false);
        NoopBackend::launch_collective(&stream, &comms[1], &call, "ar").unwrap();
        assert_eq!(
            device.launched(),
            [
                Launched::Operator { name },
                Launched::Collective {
                    rank: 1,
                    call,
                    label: "ar".into()
                }
            ]
        );
    }

    #[test]
    fn only_its_own_root_infos_are_joined() {
        let device = NoopDevice::new(0);
        let info = NoopBackend::root_info(&device).unwrap();
        assert_eq!(
            NoopBackend::init_root_info(&device, 2, 1, &info)
                .unwrap()
                .rank(),
            1
        );
        let junk = RootInfo::from_bytes(&[0; ROOT_INFO_BYTES]).unwrap();
        let refused = NoopBackend::init_root_info(&device, 2, 1, &junk).unwrap_err();
        assert!(refused.is_invalid_argument(), "{refused}");
        let out_of_range = NoopBackend::init_root_info(&device, 2, 2, &info).unwrap_err();
        assert!(out_of_range.is_invalid_argument(), "{out_of_range}");
    }
}
