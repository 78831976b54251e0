//! Collectives are traced with their rank, operation, data type and bytes. A test binary of
//! its own: the subscriber is the process's only one, so no other test's threads can leave
//! the callsites cached as uninteresting while it is installed.

use braid_backend_sim::{NodeConfig, SimBackend, SimNode};
use braid_collective::{Communicator, ReduceOp};
use braid_stream_core::{DType, Device};
use std::sync::{Arc, Mutex};

/// A writer the fmt subscriber logs into.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn each_collective_is_traced_with_its_rank_operation_and_bytes() {
    let out = Captured::default();
    let writer = out.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let node = SimNode::new(NodeConfig::new(2));
    let devices: Vec<Device<SimBackend>> = node
        .devices()
        .into_iter()
        .map(|d| Device::new(d).unwrap())
        .collect();
    let comms = Communicator::init_all(&devices).unwrap();
    let mut parts = Vec::new();
    for (device, comm) in devices.iter().zip(&comms) {
        let stream = device.create_stream(0).unwrap();
        let buf = device.alloc(24).unwrap();
        stream.memset(buf.slice(), 0).unwrap();
        comm.all_reduce(&stream, &buf, &buf, DType::F16, ReduceOp::Prod)
            .unwrap();
        parts.push((stream, buf));
    }
    for (stream, _) in &parts {
        stream.synchronize().unwrap();
    }
    let log = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("collective{rank=1 ranks=2 op=allreduce(prod) dtype=float16 bytes=24}"),
        "{log}"
    );
}
