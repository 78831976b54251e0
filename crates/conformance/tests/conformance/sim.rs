//! The conformance suite on the simulated backend (data mode, so kernels really compute).

use braid_backend_sim::{
    host_op, HostOpFn, NodeConfig, SanitizerMode, SimBackend, SimConfig, SimDevice, SimMode,
    SimNode,
};
use braid_conformance::ScaleOpArgs;
use braid_stream_core::Device;
use std::sync::Arc;

/// The suite's user operator `y = factor * x` on the simulator: a host function over the
/// declared ranges, rounding each product to the operator's data type.
fn sim_scale_body(args: ScaleOpArgs) -> Result<Arc<HostOpFn>, String> {
    Ok(host_op(move |inputs, outputs| {
        let mut bytes = Vec::with_capacity(outputs[0].len());
        for v in args.dtype.decode(inputs[0]) {
            args.dtype.push(&mut bytes, args.factor * v);
        }
        outputs[0].copy_from_slice(&bytes);
    }))
}

/// The first `n` devices of a fresh node in one server, in data mode.
fn sim_node(n: u32) -> braid_stream_core::Result<Vec<Device<SimBackend>>> {
    SimNode::new(NodeConfig::new(n).device(SimConfig::new().mode(SimMode::Data)))
        .devices()
        .into_iter()
        .map(Device::new)
        .collect()
}

/// A device of its own, in data mode.
fn sim_device(ordinal: u32) -> braid_stream_core::Result<Device<SimBackend>> {
    Device::new(SimDevice::new(
        SimConfig::new().ordinal(ordinal).mode(SimMode::Data),
    ))
}

braid_conformance::conformance_tests!(
    SimBackend,
    sim_device,
    scale_body = sim_scale_body,
    node = sim_node,
);

braid_conformance::collective_conformance_tests!(SimBackend, sim_device, node = sim_node);

/// The CLI entry point runs the same cases and they all pass.
#[test]
fn run_all_passes_every_case() {
    let harness = braid_conformance::Harness::<SimBackend>::new(|ordinal| {
        Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)))
    })
    .with_scale_body(sim_scale_body)
    .with_node(sim_node);
    let results = braid_conformance::run_all(&harness);
    assert_eq!(results.len(), braid_conformance::CASES.len());
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}

/// Cases that race on purpose, to show what a missing wait or record does, and what the
/// simulator's sanitizer reports for each.
const RACY_ON_PURPOSE: [(&str, &str); 3] = [
    ("events::wait_before_record_is_a_no_op", "race"),
    ("ordering::race_without_wait_reads_stale_data", "race"),
    // The run without `record_tagged_stream`: the freed block is reused while read.
    (
        "allocator::record_tagged_stream_protects_data",
        "use after free",
    ),
];

/// The simulator's sanitizer checks the front layer, the allocator and graph capture
/// independently: on devices whose sanitizer refuses the first race, unordered access or use
/// after free (`SanitizerMode::Abort`), every case passes (eager work, captures and their
/// replays alike) except the ones that race on purpose, and each of those is caught.
#[test]
fn cases_are_race_free_under_the_sanitizer_except_the_racy_ones() {
    let strict = |config: SimConfig| config.mode(SimMode::Data).sanitizer(SanitizerMode::Abort);
    let harness = braid_conformance::Harness::<SimBackend>::new(move |ordinal| {
        Device::new(SimDevice::new(strict(SimConfig::new().ordinal(ordinal))))
    })
    .with_scale_body(sim_scale_body)
    .with_node(move |n| {
        SimNode::new(NodeConfig::new(n).device(strict(SimConfig::new())))
            .devices()
            .into_iter()
            .map(Device::new)
            .collect()
    });
    let mut unexpected = Vec::new();
    for (name, result) in braid_conformance::run_all(&harness) {
        let racy = RACY_ON_PURPOSE.iter().find(|(case, _)| *case == name);
        match (racy, result) {
            (None, Ok(())) => {}
            (None, Err(e)) => unexpected.push(format!("{name}: {e}")),
            (Some(_), Ok(())) => unexpected.push(format!("{name}: no race was reported")),
            (Some((_, kind)), Err(e)) => {
                if !(e.message.contains("sanitizer:") && e.message.contains(kind)) {
                    unexpected.push(format!("{name}: expected a sanitizer {kind} report: {e}"));
                }
            }
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
}

/// Without a body the user-operator case fails, naming what is missing.
#[test]
fn user_operator_case_needs_a_body() {
    let harness = braid_conformance::Harness::<SimBackend>::new(|ordinal| {
        Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)))
    });
    let err =
        braid_conformance::custom_ops::user_operator_with_a_body_captures_and_replays(&harness)
            .expect_err("no body, no case");
    assert!(err.message.contains("with_scale_body"), "{err}");
}

/// Without a node factory the cross-device cases fail, naming what is missing; a factory that
/// opens the wrong devices is refused.
#[test]
fn cross_device_cases_need_a_node() {
    let harness = braid_conformance::Harness::<SimBackend>::new(|ordinal| {
        Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)))
    });
    let err = braid_conformance::cross_device::peer_copy_needs_peer_access(&harness)
        .expect_err("no node, no case");
    assert!(err.message.contains("with_node"), "{err}");
    let short = harness.with_node(|n| sim_node(n.saturating_sub(1)));
    let err = short.node(3).expect_err("a node of 2 is not a node of 3");
    assert!(err.message.contains("[0, 1]"), "{err}");
}

/// The collective cases run by `run_all_collectives` all pass too.
#[test]
fn run_all_collectives_passes_every_case() {
    let harness = braid_conformance::Harness::<SimBackend>::new(sim_device).with_node(sim_node);
    let results = braid_conformance::run_all_collectives(&harness);
    assert_eq!(results.len(), braid_conformance::COLLECTIVE_CASES.len());
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}
