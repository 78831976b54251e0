//! A recording backend for the unit tests: devices hand out addresses from distinct bases,
//! streams record the collectives they are given, nothing runs.

use crate::backend::CollectiveBackend;
use braid_stream_core::collective::{CollectiveCall, RootInfo, ROOT_INFO_BYTES};
use braid_stream_core::hal::{self, HalError};
use braid_stream_core::{
    CaptureMode, CaptureStatus, DevicePtr, EventFlags, MemInfo, Priority, TypedKernel,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub(crate) struct TestBackend;

impl hal::Backend for TestBackend {
    type Device = TestDevice;
    type Stream = TestStream;
    type Event = TestEvent;
    type Graph = TestGraph;
    type Prepared = TypedKernel;
    type OpBody = dyn Fn() + Send + Sync;
    const NAME: &'static str = "test";
}

/// What a stream of the test backend was given: (rank, call, label).
pub(crate) type Log = Arc<Mutex<Vec<(u32, CollectiveCall, String)>>>;

pub(crate) struct TestDevice {
    ordinal: u32,
    next: AtomicU64,
    pub(crate) log: Log,
}

impl TestDevice {
    pub(crate) fn new(ordinal: u32) -> TestDevice {
        TestDevice {
            ordinal,
            next: AtomicU64::new((u64::from(ordinal) + 1) << 32),
            log: Log::default(),
        }
    }
}

pub(crate) struct TestStream {
    log: Log,
}

pub(crate) struct TestEvent;

pub(crate) struct TestGraph;

/// A rank's communicator; `refuse` makes its next launches fail.
pub(crate) struct TestComm {
    pub(crate) rank: u32,
    pub(crate) refuse: AtomicBool,
}

const ROOT_MAGIC: u8 = 0xB7;

impl CollectiveBackend for TestBackend {
    type Comm = TestComm;
    const ALWAYS_CHECKS_MISMATCH: bool = false;

    fn init_all(devices: &[&TestDevice]) -> Result<Vec<TestComm>, HalError> {
        Ok((0..devices.len() as u32)
            .map(|rank| TestComm {
                rank,
                refuse: AtomicBool::new(false),
            })
            .collect())
    }

    fn root_info(_device: &TestDevice) -> Result<RootInfo, HalError> {
        let mut bytes = [0; ROOT_INFO_BYTES];
        bytes[0] = ROOT_MAGIC;
        Ok(RootInfo(Box::new(bytes)))
    }

    fn init_root_info(
        _device: &TestDevice,
        _ranks: u32,
        rank: u32,
        info: &RootInfo,
    ) -> Result<TestComm, HalError> {
        if info.as_bytes()[0] != ROOT_MAGIC {
            return Err(HalError::InvalidArgument("not a root info".into()));
        }
        Ok(TestComm {
            rank,
            refuse: AtomicBool::new(false),
        })
    }

    fn launch(
        stream: &TestStream,
        comm: &TestComm,
        call: &CollectiveCall,
        label: &str,
    ) -> Result<(), HalError> {
        if comm.refuse.load(Ordering::Relaxed) {
            return Err(HalError::Unsupported("refused by the test"));
        }
        stream
            .log
            .lock()
            .push((comm.rank, *call, label.to_string()));
        Ok(())
    }
}

impl hal::Device for TestDevice {
    type B = TestBackend;

    fn ordinal(&self) -> u32 {
        self.ordinal
    }

    fn default_stream(&self) -> Result<TestStream, HalError> {
        self.create_stream(0)
    }

    fn create_stream(&self, _priority: Priority) -> Result<TestStream, HalError> {
        Ok(TestStream {
            log: self.log.clone(),
        })
    }

    fn create_event(&self, _flags: EventFlags) -> Result<TestEvent, HalError> {
        Ok(TestEvent)
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

impl hal::Stream for TestStream {
    type B = TestBackend;

    fn prepare(&self, kernel: &TypedKernel) -> Result<TypedKernel, HalError> {
        Ok(kernel.clone())
    }

    fn launch_prepared(
        &self,
        _prepared: TypedKernel,
        _workspace: Option<braid_stream_core::DeviceSlice>,
        _label: &str,
    ) -> Result<(), HalError> {
        Ok(())
    }

    fn launch_operator(&self, _op: &hal::Operator<'_, TestBackend>) -> Result<(), HalError> {
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

    fn record(&self, _event: &TestEvent) -> Result<(), HalError> {
        Ok(())
    }

    fn wait(&self, _event: &TestEvent) -> Result<(), HalError> {
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

    fn end_capture(&self) -> Result<TestGraph, HalError> {
        Ok(TestGraph)
    }

    fn capture_status(&self) -> Result<CaptureStatus, HalError> {
        Ok(CaptureStatus::None)
    }
}

impl hal::Event for TestEvent {
    type B = TestBackend;

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

impl hal::Graph for TestGraph {
    type B = TestBackend;

    fn launch(&self, _stream: &TestStream) -> Result<(), HalError> {
        Ok(())
    }

    fn node_count(&self) -> usize {
        0
    }
}
