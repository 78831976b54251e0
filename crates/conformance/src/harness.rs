//! The harness cases run in, their error type, and the "device still works" check.

use braid_stream_core::hal::Backend;
use braid_stream_core::{f32_bytes, DType, Device, DeviceSlice, Kernel, Stream};
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

/// Device time of the "long work" cases put in front of what must still be pending
/// (`Kernel::Busy`), in nanoseconds. Long enough that a host call right after submitting it
/// observes the work as pending on any backend; on the simulator it is virtual time and costs
/// nothing.
pub const LONG_WORK_NS: u64 = 50_000_000;

/// Opens a fresh device with the given ordinal.
pub type DeviceFactory<B> =
    Arc<dyn Fn(u32) -> braid_stream_core::Result<Device<B>> + Send + Sync + 'static>;

/// Opens the first `n` devices of one fresh node: devices that share an address space, can
/// wait on each other's events and can be given peer access to each other's memory (a
/// simulated node; devices `0..n` of one ACL or CUDA process).
pub type NodeFactory<B> =
    Arc<dyn Fn(u32) -> braid_stream_core::Result<Vec<Device<B>>> + Send + Sync + 'static>;

/// What the suite's user operator `y = factor * x` works on, handed to the backend's
/// [`ScaleBodyFactory`].
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct ScaleOpArgs {
    /// The input: `elements` values of `dtype`.
    pub x: DeviceSlice,
    /// The output, as long as `x` (not overlapping it).
    pub y: DeviceSlice,
    /// Number of elements.
    pub elements: u64,
    /// The data type of `x` and `y`.
    pub dtype: DType,
    /// The multiplier.
    pub factor: f32,
    /// Workspace the launching stream handed out for the operator ([`Stream::workspace`]);
    /// a body that needs more refuses with an error.
    pub workspace: DeviceSlice,
}

/// Makes the body of the suite's user operator `y = factor * x` on backend `B` (a host
/// function on the simulator, a native-stream closure on ACL). An `Err` names why the backend
/// cannot make one.
pub type ScaleBodyFactory<B> =
    Arc<dyn Fn(ScaleOpArgs) -> Result<Arc<<B as Backend>::OpBody>, String> + Send + Sync + 'static>;

/// What a case runs against: a factory of fresh devices of backend `B`, a factory of nodes of
/// several devices, the backend's body for the suite's user operator, and, where known, how
/// many devices the machine has.
pub struct Harness<B: Backend> {
    factory: DeviceFactory<B>,
    node: Option<NodeFactory<B>>,
    scale_body: Option<ScaleBodyFactory<B>>,
    devices: Option<u32>,
}

impl<B: Backend> Clone for Harness<B> {
    fn clone(&self) -> Self {
        Harness {
            factory: self.factory.clone(),
            node: self.node.clone(),
            scale_body: self.scale_body.clone(),
            devices: self.devices,
        }
    }
}

impl<B: Backend> fmt::Debug for Harness<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Harness<{}>", B::NAME)
    }
}

impl<B: Backend> Harness<B> {
    /// A harness opening devices with `factory` (given the ordinal, it returns a fresh device).
    pub fn new<F>(factory: F) -> Self
    where
        F: Fn(u32) -> braid_stream_core::Result<Device<B>> + Send + Sync + 'static,
    {
        Harness {
            factory: Arc::new(factory),
            node: None,
            scale_body: None,
            devices: None,
        }
    }

    /// This harness on a machine of `count` devices: a case that needs more (a node of more
    /// devices, or a device of a higher ordinal) is skipped naming the count
    /// ([`CaseError::skip`]) instead of failing to open them. Without it every device asked
    /// for is opened.
    pub fn with_device_count(mut self, count: u32) -> Self {
        self.devices = Some(count);
        self
    }

    /// A skip when the machine has fewer than `needed` devices.
    #[track_caller]
    fn check_device_count(&self, needed: u32) -> Result<(), CaseError> {
        match self.devices {
            Some(count) if needed > count => Err(CaseError::skip(format!(
                "needs {needed} devices, this machine has {count}"
            ))),
            _ => Ok(()),
        }
    }

    /// This harness with `bodies` making the body of the suite's user operator
    /// `y = factor * x` (the cases with a computing user operator fail without one).
    pub fn with_scale_body<F>(mut self, bodies: F) -> Self
    where
        F: Fn(ScaleOpArgs) -> Result<Arc<B::OpBody>, String> + Send + Sync + 'static,
    {
        self.scale_body = Some(Arc::new(bodies));
        self
    }

    /// This harness with `nodes` opening the first `n` devices of one fresh node (the
    /// cross-device cases fail without one).
    pub fn with_node<F>(mut self, nodes: F) -> Self
    where
        F: Fn(u32) -> braid_stream_core::Result<Vec<Device<B>>> + Send + Sync + 'static,
    {
        self.node = Some(Arc::new(nodes));
        self
    }

    /// `n` devices of one fresh node, device `i` with ordinal `i`; a skip on a machine of
    /// fewer ([`Harness::with_device_count`]).
    #[track_caller]
    pub fn node(&self, n: u32) -> Result<Vec<Device<B>>, CaseError> {
        self.check_device_count(n)?;
        let Some(nodes) = &self.node else {
            return Err(CaseError::new(format!(
                "the {} harness opens no node of devices (Harness::with_node)",
                B::NAME
            )));
        };
        let devices =
            nodes(n).map_err(|e| CaseError::new(format!("opening a node of {n} failed: {e}")))?;
        let ordinals: Vec<u32> = devices.iter().map(|d| d.ordinal()).collect();
        if ordinals != (0..n).collect::<Vec<_>>() {
            return Err(CaseError::new(format!(
                "a node of {n} was asked for but the factory opened devices {ordinals:?}"
            )));
        }
        Ok(devices)
    }

    /// The backend's body of `y = factor * x` over `args`.
    #[track_caller]
    pub fn scale_body(&self, args: ScaleOpArgs) -> Result<Arc<B::OpBody>, CaseError> {
        let Some(bodies) = &self.scale_body else {
            return Err(CaseError::new(format!(
                "the {} harness has no user-operator body (Harness::with_scale_body)",
                B::NAME
            )));
        };
        bodies(args).map_err(|e| CaseError::new(format!("making the scale body failed: {e}")))
    }

    /// A fresh device with ordinal 0.
    #[track_caller]
    pub fn device(&self) -> Result<Device<B>, CaseError> {
        self.device_with_ordinal(0)
    }

    /// A fresh device with the given ordinal; a skip on a machine without it
    /// ([`Harness::with_device_count`]).
    #[track_caller]
    pub fn device_with_ordinal(&self, ordinal: u32) -> Result<Device<B>, CaseError> {
        self.check_device_count(ordinal.saturating_add(1))?;
        let device = (self.factory)(ordinal)
            .map_err(|e| CaseError::new(format!("opening device {ordinal} failed: {e}")))?;
        if device.ordinal() != ordinal {
            return Err(CaseError::new(format!(
                "the factory was asked for ordinal {ordinal} but opened {}",
                device.ordinal()
            )));
        }
        Ok(device)
    }
}

/// Why a case failed, or could not run: a message and the line of the case that found it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CaseError {
    /// What went wrong.
    pub message: String,
    /// Where in the suite it was detected.
    pub location: &'static Location<'static>,
    /// The case could not run on this machine (it needs more devices than there are): a
    /// skip, not a failure.
    pub skipped: bool,
}

impl CaseError {
    /// A failure at the caller's location.
    #[track_caller]
    pub fn new(message: impl Into<String>) -> Self {
        CaseError {
            message: message.into(),
            location: Location::caller(),
            skipped: false,
        }
    }

    /// A case that cannot run on this machine, saying why (the devices it needs and has).
    #[track_caller]
    pub fn skip(message: impl Into<String>) -> Self {
        CaseError {
            skipped: true,
            ..CaseError::new(message)
        }
    }
}

impl fmt::Display for CaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at {})", self.message, self.location)
    }
}

impl std::error::Error for CaseError {}

impl From<braid_stream_core::StreamError> for CaseError {
    #[track_caller]
    fn from(err: braid_stream_core::StreamError) -> Self {
        CaseError::new(format!("unexpected error: {err} ({err:?})"))
    }
}

impl From<braid_allocator::AllocError> for CaseError {
    #[track_caller]
    fn from(err: braid_allocator::AllocError) -> Self {
        CaseError::new(format!("unexpected allocator error: {err} ({err:?})"))
    }
}

impl From<braid_collective::CollectiveError> for CaseError {
    #[track_caller]
    fn from(err: braid_collective::CollectiveError) -> Self {
        CaseError::new(format!("unexpected collective error: {err} ({err:?})"))
    }
}

impl From<braid_graph_capture::GraphError> for CaseError {
    #[track_caller]
    fn from(err: braid_graph_capture::GraphError) -> Self {
        CaseError::new(format!("unexpected graph-capture error: {err} ({err:?})"))
    }
}

impl From<String> for CaseError {
    #[track_caller]
    fn from(message: String) -> Self {
        CaseError::new(message)
    }
}

/// Proves `device` still works: allocates a small buffer, runs fill, add and reduce on the
/// default stream and on a new stream, copies the results back and checks the numbers.
///
/// Call it outside any capture (it uses the default stream and synchronizes).
pub fn check_device_works<B: Backend>(device: &Device<B>) -> Result<(), String> {
    const N: u64 = 256;
    let fail =
        |step: &str, e: braid_stream_core::StreamError| format!("device check: {step} failed: {e}");
    let side = device
        .create_stream(0)
        .map_err(|e| fail("create_stream", e))?;
    for (round, stream) in [device.default_stream(), side].into_iter().enumerate() {
        let mem = device.alloc(3 * N * 4 + 4).map_err(|e| fail("alloc", e))?;
        let part = |i: u64| mem.range(i * N * 4, N * 4).expect("inside the segment");
        let (a, b, c) = (part(0), part(1), part(2));
        let sum = mem.range(3 * N * 4, 4).expect("inside the segment");
        let base = round as f32 + 1.0;
        let run = |stream: &Stream<B>| -> braid_stream_core::Result<(Vec<f32>, Vec<f32>)> {
            stream.copy_h2d(a, f32_bytes(&vec![base; N as usize]))?;
            stream.launch(&Kernel::Fill { dst: b, value: 0.5 })?;
            stream.launch(&Kernel::Add { a, b, out: c })?;
            stream.launch(&Kernel::ReduceSum { src: c, dst: sum })?;
            let values = stream.copy_d2h(c)?.wait_f32()?;
            let total = stream.copy_d2h(sum)?.wait_f32()?;
            Ok((values, total))
        };
        let (values, total) = run(&stream).map_err(|e| fail(&format!("work on {stream:?}"), e))?;
        let want = base + 0.5;
        if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| **v != want) {
            return Err(format!(
                "device check on {stream:?}: element {i} is {v}, expected {want}"
            ));
        }
        if total != [want * N as f32] {
            return Err(format!(
                "device check on {stream:?}: reduce gave {total:?}, expected {}",
                want * N as f32
            ));
        }
        stream
            .synchronize()
            .map_err(|e| fail("Stream::synchronize", e))?;
    }
    device
        .synchronize()
        .map_err(|e| fail("Device::synchronize", e))
}
