//! One device computing holds up no other work of its node: kernels and user operators'
//! host bodies compute outside the engine lock ([`braid_backend_sim`]'s `job` module), so
//! while a device's thread is inside one, the other devices' streams compute, their
//! collectives complete, their host bodies run and their host gates open.
//!
//! Device 0's work here is a host body that waits for a gate: a kernel that cannot finish
//! until the test says so. The other devices' work must all complete before the gate opens.
//! Were device 0's computing to hold the engine (or anything the others need), their first
//! call would wait for it, the body would give up after two minutes, and the test fail; no
//! wall-clock comparison decides it, so a loaded machine cannot make it fail.

use crate::common;

use braid_backend_sim::{host_op, NodeConfig, SimBackend, SimComm, SimConfig, SimNode, Topology};
use braid_stream_core::collective::{CollectiveCall, CollectiveOp, ReduceOp};
use braid_stream_core::hal::CollectiveBackend;
use braid_stream_core::{
    ops, CustomOp, DType, Device, DeviceMemory, Kernel, OpCost, Stream, Tensor,
};
use common::unit_profile;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// How long the gated body waits before it gives up (only a regression makes it wait).
const PATIENCE: Duration = Duration::from_secs(120);

fn upload(s: &Stream<SimBackend>, values: &[f32]) -> DeviceMemory<SimBackend> {
    let mem = s.device().alloc(values.len() as u64 * 4).unwrap();
    s.copy_h2d(mem.slice(), DType::F32.encode(values)).unwrap();
    mem
}

fn download(s: &Stream<SimBackend>, mem: &DeviceMemory<SimBackend>) -> Vec<f32> {
    DType::F32.decode(&s.copy_d2h(mem.slice()).unwrap().wait().unwrap())
}

#[test]
fn a_device_computing_holds_up_no_other_device_collective_or_host_body() {
    let node = SimNode::new(NodeConfig {
        devices: 3,
        device: SimConfig::new().capacity(1 << 30).profile(unit_profile()),
        topology: Topology::atlas_800_a2(3),
    });
    let hal = node.devices();
    let devs: Vec<Device<SimBackend>> = hal
        .iter()
        .map(|d| Device::new(d.clone()).unwrap())
        .collect();

    // Device 0: a body that signals it has started, then waits for the gate. It takes an
    // hour of simulated time, so its end lies past everything the other devices do: their
    // synchronizations never need its result.
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate_rx = Mutex::new(gate_rx);
    let flag = devs[0].alloc(16).unwrap();
    let gated = CustomOp::<SimBackend>::new("gated")
        .write(flag.slice())
        .cost(OpCost::Fixed {
            ns: 3_600_000_000_000,
        })
        .body(host_op(move |_, outputs| {
            started_tx.send(()).unwrap();
            let released = gate_rx.lock().unwrap().recv_timeout(PATIENCE).is_ok();
            let value: f32 = if released { 1.0 } else { -1.0 };
            outputs[0].copy_from_slice(&DType::F32.encode(&[value; 4]));
        }));
    let device0 = devs[0].clone();
    let worker = std::thread::spawn(move || {
        let s = device0.create_stream(0).unwrap();
        // The launch's thread computes the body before the launch returns.
        s.launch_op(&gated).unwrap();
        download(&s, &flag)
    });
    started_rx
        .recv_timeout(PATIENCE)
        .expect("device 0's body started");

    // Meanwhile, device 1 computes a product...
    let s1 = devs[1].create_stream(0).unwrap();
    let n = 64;
    let a_values: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32).collect();
    let a_mem = upload(&s1, &a_values);
    let out_mem = devs[1].alloc((n * n * 4) as u64).unwrap();
    let tensor =
        |m: &DeviceMemory<SimBackend>| Tensor::new(m.slice(), DType::F32, &[n, n]).unwrap();
    let (a, out) = (tensor(&a_mem), tensor(&out_mem));
    s1.launch(ops::matmul(&a, &a, &out).unwrap()).unwrap();
    let product = download(&s1, &out_mem);
    let want: f32 = (0..n).map(|k| ((k % 7) * ((k * n) % 7)) as f32).sum();
    assert_eq!(product[0], want);

    // ...runs a host body of its own...
    let x = upload(&s1, &[1.0, 2.0, 3.0, 4.0]);
    let doubled = devs[1].alloc(16).unwrap();
    let double = CustomOp::<SimBackend>::new("double")
        .read(x.slice())
        .write(doubled.slice())
        .body(host_op(|inputs, outputs| {
            let v: Vec<f32> = DType::F32
                .decode(inputs[0])
                .iter()
                .map(|v| 2.0 * v)
                .collect();
            outputs[0].copy_from_slice(&DType::F32.encode(&v));
        }));
    s1.launch_op(&double).unwrap();
    assert_eq!(download(&s1, &doubled), [2.0, 4.0, 6.0, 8.0]);

    // ...opens a host gate from another thread, as braid-acl-sim's callback thread does
    // after a blocking host callback, and runs the work held behind it...
    let gate = s1.hal().hold_gate().unwrap();
    let held = devs[1].alloc(16).unwrap();
    s1.launch(Kernel::Fill {
        dst: held.slice(),
        value: 5.0,
    })
    .unwrap();
    std::thread::spawn(move || gate.open().unwrap())
        .join()
        .unwrap();
    assert_eq!(download(&s1, &held), [5.0; 4]);

    // ...and all-reduces with device 2.
    let s2 = devs[2].create_stream(0).unwrap();
    let comms = SimComm::init_all(&[&hal[1], &hal[2]]).unwrap();
    let parts = [upload(&s1, &[1.0; 8]), upload(&s2, &[2.0; 8])];
    for ((s, comm), part) in [&s1, &s2].into_iter().zip(&comms).zip(&parts) {
        let call = CollectiveCall::new(
            CollectiveOp::AllReduce(ReduceOp::Sum),
            part.ptr(),
            part.ptr(),
            8,
            DType::F32,
        );
        SimBackend::launch_collective(s.hal(), comm, &call, "all-reduce").unwrap();
    }
    assert_eq!(download(&s1, &parts[0]), [3.0; 8]);
    assert_eq!(download(&s2, &parts[1]), [3.0; 8]);

    // All of it while device 0's thread was still inside its body: now open the gate.
    gate_tx.send(()).unwrap();
    assert_eq!(
        worker.join().unwrap(),
        [1.0; 4],
        "device 0's body was released by the gate, not tired of waiting"
    );
}
