//! Llama-2-7B's decode latency as braid's decoder predicts it on the calibrated 910B profile,
//! against every `llama2_7b_decode` row of the profile's table of published measurements
//! (`crates/backend-sim/profiles/published_910b.json`): a prediction within the band
//! of ratios (0.67-1.5) must not carry a gap note, and one outside must name its gap.

#![cfg(feature = "sim")]

use braid::scenarios::devices::{sim_devices, sim_node, Role};
use braid::scenarios::llama::timing::{decode_step_times, published_decode_rows, RATIO_BAND};
use braid::scenarios::llama::LlamaConfig;

#[test]
fn every_published_llama2_7b_decode_row_is_within_the_band_or_names_its_gap() {
    let rows = published_decode_rows();
    assert!(!rows.is_empty(), "the table has Llama-2-7B decode rows");
    let config = LlamaConfig::llama2_7b(1024);
    let mut failures = Vec::new();
    for row in rows {
        assert!(!row.source.is_empty());
        let devices = sim_devices(&sim_node(Role::Timing, row.devices as u32)).unwrap();
        let t = decode_step_times(&devices, &config, row.batch, 1).unwrap();
        let predicted_ms = match row.mode.as_str() {
            "eager" => t.eager_us,
            "graph" => t.graph_us,
            other => panic!("mode {other}"),
        } / 1000.0;
        let ratio = predicted_ms / row.ms;
        let within = (RATIO_BAND.0..=RATIO_BAND.1).contains(&ratio);
        println!(
            "batch {} devices {} {}: predicted {predicted_ms:.2} ms, published {} ms, ratio {ratio:.2}",
            row.batch, row.devices, row.mode, row.ms
        );
        match (within, &row.gap) {
            (false, None) => failures.push(format!(
                "batch {} devices {}: ratio {ratio:.2} outside {RATIO_BAND:?} with no gap note",
                row.batch, row.devices
            )),
            (true, Some(_)) => failures.push(format!(
                "batch {} devices {}: ratio {ratio:.2} is within {RATIO_BAND:?}: remove the gap note",
                row.batch, row.devices
            )),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn graph_replay_beats_eager_where_the_host_sets_the_pace() {
    // Eight devices at batch 1: each device's share of the weights reads in about a
    // millisecond, so the eager launches set the pace and the graph removes them.
    let config = LlamaConfig::llama2_7b(1024);
    let t = decode_step_times(
        &sim_devices(&sim_node(Role::Timing, 8)).unwrap(),
        &config,
        1,
        1,
    )
    .unwrap();
    assert!(t.graph_us < t.eager_us, "{t:?}");
}
