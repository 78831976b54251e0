//! The conformance suite on the simulated backend (data mode, so kernels really compute).

use braid_backend_sim::{SimBackend, SimConfig, SimDevice, SimMode};
use braid_stream_core::Device;

braid_conformance::conformance_tests!(SimBackend, |ordinal| {
    Device::new(SimDevice::new(
        SimConfig::new().ordinal(ordinal).mode(SimMode::Data),
    ))
});

/// The CLI entry point runs the same cases and they all pass.
#[test]
fn run_all_passes_every_case() {
    let harness = braid_conformance::Harness::<SimBackend>::new(|ordinal| {
        Device::new(SimDevice::new(SimConfig::new().ordinal(ordinal)))
    });
    let results = braid_conformance::run_all(&harness);
    assert_eq!(results.len(), braid_conformance::CASES.len());
    let failed: Vec<String> = results
        .iter()
        .filter_map(|(name, r)| r.as_ref().err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}
