//! Several devices in one simulated node: identities, addresses, host clocks, cross-device
//! events, peer copies over links, per-device statistics and timelines.

use crate::common;

use braid_backend_sim::{LinkSpec, NodeConfig, SimConfig, SimDevice, SimNode, Topology};
use braid_stream_core::hal::{Device as _, Event as _, HalError, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::{DeviceSlice, EventFlags};
use common::*;
use serde_json::Value;

/// A node of `n` unit-profile devices in data mode, in `topology`.
fn unit_node(n: u32, topology: Topology) -> SimNode {
    SimNode::new(
        NodeConfig::new(n)
            .device(SimConfig::new().capacity(1 << 30).profile(unit_profile()))
            .topology(topology),
    )
}

/// A link of 1 byte/ns and `latency` ns.
fn slow_link(latency: u64) -> LinkSpec {
    LinkSpec {
        bytes_per_s: 1_000_000_000,
        latency_ns: latency,
    }
}

/// One server of `n` devices whose links move 1 byte/ns after 50 ns.
fn unit_topology(n: u32) -> Topology {
    Topology {
        intra_server: slow_link(50),
        ..Topology::atlas_800_a2(n)
    }
}

fn is_invalid(e: &HalError, needles: &[&str]) -> bool {
    matches!(e, HalError::InvalidArgument(m) if needles.iter().all(|n| m.contains(n)))
}

#[test]
fn devices_have_ordinals_addresses_and_memory_of_their_own() {
    let node = unit_node(3, Topology::atlas_800_a2(3));
    assert_eq!(node.len(), 3);
    assert!(!node.is_empty());
    assert!(node.device(3).is_none());
    let devs = node.devices();
    let ordinals: Vec<u32> = devs.iter().map(|d| d.ordinal()).collect();
    assert_eq!(ordinals, vec![0, 1, 2]);
    assert_eq!(devs[2].index_in_node(), 2);
    let a = devs[0].alloc(4096).unwrap();
    let b = devs[1].alloc(4096).unwrap();
    assert_ne!(a, b);
    let (ra, rb) = (DeviceSlice::new(a, 4096), DeviceSlice::new(b, 4096));
    assert_eq!(devs[0].is_live(ra), Some(true));
    assert_eq!(devs[0].is_live(rb), Some(false));
    assert_eq!(devs[1].is_live(rb), Some(true));
    assert_eq!(devs[1].is_live(ra), Some(false));
    // Capacity and statistics are per device.
    assert_eq!(devs[0].mem_info().unwrap().free, (1 << 30) - 4096);
    assert_eq!(devs[2].mem_info().unwrap().free, 1 << 30);
    assert_eq!(devs[1].stats().allocations, 1);
    assert_eq!(devs[2].stats().allocations, 0);
    // A device's free does not accept another device's memory.
    // SAFETY: no work uses `b`; the call is refused anyway.
    assert!(unsafe { devs[0].free(b) }.is_err());
    // SAFETY: no work uses `b`.
    unsafe { devs[1].free(b).unwrap() };
    assert_eq!(devs[0].config().ordinal, 0);
    assert_eq!(devs[1].config().ordinal, 1);
}

#[test]
fn a_plain_device_keeps_its_ordinal_and_is_a_node_of_one() {
    let dev = SimDevice::new(SimConfig::new().ordinal(5));
    assert_eq!(dev.ordinal(), 5);
    assert_eq!(dev.index_in_node(), 0);
    let other = SimDevice::new(SimConfig::new());
    assert!(!dev.can_access_peer(&other).unwrap());
    let e = dev.enable_peer_access(&other).unwrap_err();
    assert!(is_invalid(&e, &["different simulated nodes"]), "{e}");
    let ev = other.create_event(EventFlags::ORDERING).unwrap();
    let s = dev.create_stream(0).unwrap();
    assert!(is_invalid(
        &s.wait(&ev).unwrap_err(),
        &["different simulated nodes"]
    ));
    assert!(is_invalid(
        &s.record(&ev).unwrap_err(),
        &["different simulated nodes"]
    ));
}

#[test]
fn each_device_has_its_own_host_clock() {
    let node = unit_node(2, Topology::atlas_800_a2(2));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    let s = a.create_stream(0).unwrap();
    for _ in 0..10 {
        s.launch(&TypedKernel::from(&busy(1000)), "k").unwrap();
    }
    a.synchronize().unwrap();
    assert!(a.host_time_ns() > 10_000);
    assert_eq!(b.host_time_ns(), 0);
    // Synchronizing device 1 waits only for device 1's (no) work.
    b.synchronize().unwrap();
    assert!(b.host_time_ns() < 100, "{}", b.host_time_ns());
}

#[test]
fn a_stream_waits_on_an_event_of_another_device() {
    let node = unit_node(2, Topology::atlas_800_a2(2));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    sa.launch(&TypedKernel::from(&busy(5000)), "producer")
        .unwrap();
    let e = a.create_event(EventFlags::ORDERING).unwrap();
    sa.record(&e).unwrap();
    sb.wait(&e).unwrap();
    sb.launch(&TypedKernel::from(&busy(100)), "consumer")
        .unwrap();
    let producer = a.timeline().into_iter().find(|o| o.label == "producer");
    let consumer = b.timeline().into_iter().find(|o| o.label == "consumer");
    let (producer, consumer) = (producer.unwrap(), consumer.unwrap());
    assert!(consumer.start_ns >= producer.end_ns);
    assert_eq!((producer.device, consumer.device), (0, 1));
    // An event is recorded on streams of its own device only.
    let err = sb.record(&e).unwrap_err();
    assert!(is_invalid(&err, &["device 0", "device 1"]), "{err}");
    // Event times of one node compare.
    let (t0, t1) = (
        a.create_event(EventFlags::TIMING).unwrap(),
        b.create_event(EventFlags::TIMING).unwrap(),
    );
    sa.record(&t0).unwrap();
    sb.record(&t1).unwrap();
    // Device 0's host has not seen device 1's event complete: its clock is its own.
    a.synchronize().unwrap();
    let err = t0.elapsed_ms(&t1).unwrap_err();
    assert!(is_invalid(&err, &["not completed"]), "{err}");
    // Once device 0's stream waited for it, device 0's host has.
    sa.wait(&t1).unwrap();
    a.synchronize().unwrap();
    assert!(t0.elapsed_ms(&t1).unwrap() > 0.0);
}

#[test]
fn peer_copies_need_peer_access_and_move_bytes_over_the_link() {
    let node = unit_node(2, unit_topology(2));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    let src = upload(&a, &sa, &[1.0, 2.0, 3.0, 4.0]);
    let dst = b.alloc(16).unwrap();
    let err = sb.memcpy_d2d(dst, src, 16).unwrap_err();
    assert!(
        is_invalid(&err, &["device 1", "device 0", "enable_peer_access"]),
        "{err}"
    );
    assert!(b.can_access_peer(&a).unwrap());
    b.enable_peer_access(&a).unwrap();
    let before = b.host_time_ns();
    sb.memcpy_d2d(dst, src, 16).unwrap();
    assert_eq!(download(&sb, dst, 4), vec![1.0, 2.0, 3.0, 4.0]);
    let copy = b
        .timeline()
        .into_iter()
        .find(|o| o.kind == "memcpy_d2d")
        .unwrap();
    // Latency 50 ns + 16 bytes at 1 byte/ns.
    assert_eq!(copy.duration_ns(), 66);
    assert!(copy.start_ns >= before);
    // Access is per direction: device 0 has not enabled access to device 1.
    let back = a.alloc(16).unwrap();
    assert!(sa.memcpy_d2d(back, dst, 16).is_err());
    // A kernel on device 0 may not touch device 1's memory either.
    let fill = Kernel::Fill {
        dst: slice(dst, 4),
        value: 0.0,
    };
    let err = sa
        .launch(&TypedKernel::from(&fill), "remote fill")
        .unwrap_err();
    assert!(
        is_invalid(&err, &["remote fill", "device 0", "device 1"]),
        "{err}"
    );
    let self_peer = a.enable_peer_access(&a).unwrap_err();
    assert!(is_invalid(&self_peer, &["itself"]), "{self_peer}");
    // Everything still works after the refusals.
    a.enable_peer_access(&b).unwrap();
    sa.memcpy_d2d(back, dst, 16).unwrap();
    assert_eq!(download(&sa, back, 4), vec![1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn transfers_on_one_link_take_turns_and_other_links_run_at_once() {
    // Four copy engines per device: only the links constrain the copies.
    let profile = braid_backend_sim::DeviceProfile {
        copy_engines: 4,
        ..unit_profile()
    };
    let node = SimNode::new(
        NodeConfig::new(3)
            .device(SimConfig::new().profile(profile))
            .topology(unit_topology(3)),
    );
    let devs = node.devices();
    for d in &devs[1..] {
        d.enable_peer_access(&devs[0]).unwrap();
    }
    let src = devs[0].alloc(1000).unwrap();
    let (d1, d2) = (devs[1].alloc(1000).unwrap(), devs[2].alloc(1000).unwrap());
    let (s1, s1b) = (
        devs[1].create_stream(0).unwrap(),
        devs[1].create_stream(0).unwrap(),
    );
    let s2 = devs[2].create_stream(0).unwrap();
    s1.memcpy_d2d(d1, src, 1000).unwrap();
    s1b.memcpy_d2d(d1, src, 500).unwrap();
    s2.memcpy_d2d(d2, src, 1000).unwrap();
    let t = node.timeline();
    let (c1, c1b, c2) = (&t[0], &t[1], &t[2]);
    assert_eq!((c1.device, c1b.device, c2.device), (1, 1, 2));
    assert_eq!(c1.duration_ns(), 1050);
    // One link 0 → 1: the second copy waits for the first.
    assert_eq!(c1b.start_ns, c1.end_ns);
    assert_eq!(c1b.duration_ns(), 550);
    // Link 0 → 2 is another link: its copy runs meanwhile.
    assert!(c2.start_ns < c1.end_ns);
}

#[test]
fn crossing_servers_is_slower_and_needs_collectives() {
    let node = SimNode::new(NodeConfig::new(4).topology(Topology::two_servers(2)));
    let devs = node.devices();
    assert!(devs[0].can_access_peer(&devs[1]).unwrap());
    assert!(!devs[0].can_access_peer(&devs[2]).unwrap());
    let err = devs[0].enable_peer_access(&devs[2]).unwrap_err();
    assert!(
        is_invalid(&err, &["device 0", "device 2", "different servers"]),
        "{err}"
    );
    let t = node.topology();
    assert!(t.link_between(0, 2).transfer_ns(1 << 20) > t.link_between(0, 1).transfer_ns(1 << 20));
}

#[test]
fn a_peer_copy_racing_a_writer_on_another_device_is_reported_with_both_devices() {
    let node = unit_node(2, unit_topology(2));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    b.enable_peer_access(&a).unwrap();
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    let src = a.alloc(4096).unwrap();
    let dst = b.alloc(4096).unwrap();
    let fill = Kernel::Fill {
        dst: slice(src, 1024),
        value: 1.0,
    };
    sa.launch(&TypedKernel::from(&fill), "writer").unwrap();
    // No event between the writer on device 0 and the copy on device 1.
    sb.memcpy_d2d(dst, src, 4096).unwrap();
    let reports = a.sanitizer_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    let first = r.first.as_ref().unwrap();
    assert_eq!((first.device, first.label.as_str()), (0, "writer"));
    assert_eq!(
        (r.second.device, r.second.label.as_str()),
        (1, "memcpy_d2d")
    );
    let text = r.to_string();
    assert!(
        text.contains("device 0 stream") && text.contains("device 1 stream"),
        "{text}"
    );
    // Ordered by an event across devices, the same copy is clean.
    b.synchronize().unwrap();
    a.clear_sanitizer_reports();
    let e = a.create_event(EventFlags::ORDERING).unwrap();
    sa.launch(&TypedKernel::from(&fill), "writer").unwrap();
    sa.record(&e).unwrap();
    sb.wait(&e).unwrap();
    sb.memcpy_d2d(dst, src, 4096).unwrap();
    assert!(b.sanitizer_reports().is_empty());
}

#[test]
fn timelines_and_the_trace_have_a_process_per_device() {
    let node = unit_node(2, unit_topology(2));
    let (a, b) = (node.device(0).unwrap(), node.device(1).unwrap());
    b.enable_peer_access(&a).unwrap();
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    let src = a.alloc(256).unwrap();
    let dst = b.alloc(256).unwrap();
    sa.launch(&TypedKernel::from(&busy(100)), "on a").unwrap();
    let e = a.create_event(EventFlags::ORDERING).unwrap();
    sa.record(&e).unwrap();
    sb.wait(&e).unwrap();
    sb.memcpy_d2d(dst, src, 256).unwrap();
    assert_eq!(a.timeline().len(), 1);
    assert_eq!(b.timeline().len(), 1);
    assert_eq!(node.timeline().len(), 2);
    assert_eq!(a.stats().ops_executed, 1);
    assert_eq!(b.stats().ops_executed, 1);
    assert!(node.makespan_ns() >= b.makespan_ns());

    let trace: Value = serde_json::from_str(&node.chrome_trace_json()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let processes: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        processes,
        vec![
            (0, "braid sim device 0 (unit)"),
            (1, "braid sim device 1 (unit)")
        ]
    );
    let slice = |name: &str| {
        events
            .iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap_or_else(|| panic!("no slice {name}"))
    };
    assert_eq!(slice("on a")["pid"], 0);
    assert_eq!(slice("memcpy_d2d")["pid"], 1);
    assert_eq!(slice("memcpy_d2d")["tid"], sb.index() + 1);
    let link = events
        .iter()
        .find(|e| e["ph"] == "X" && e["cat"] == "link")
        .unwrap();
    assert_eq!(link["pid"], 1);
    let track = events
        .iter()
        .find(|e| e["name"] == "thread_name" && e["tid"] == link["tid"] && e["pid"] == 1)
        .unwrap();
    assert_eq!(track["args"]["name"], "link 0→1");
    // The flow from the record on device 0 to the wait on device 1 crosses processes.
    let start = events.iter().find(|e| e["ph"] == "s").unwrap();
    let end = events.iter().find(|e| e["ph"] == "f").unwrap();
    assert_eq!(
        (start["pid"].clone(), end["pid"].clone()),
        (0.into(), 1.into())
    );
    // A device's own trace has only its process.
    let own: Value = serde_json::from_str(&b.chrome_trace_json()).unwrap();
    let pids: Vec<u64> = own["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["pid"].as_u64())
        .collect();
    assert!(pids.iter().all(|&p| p == 1), "{pids:?}");
}
