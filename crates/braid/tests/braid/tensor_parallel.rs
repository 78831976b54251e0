//! The `tensor_parallel` scenario on simulated nodes: the sharded step computes what one
//! device computes on 2, 4 and 8 devices (eagerly and replayed as graphs), overlapping the
//! all-reduce beats running it on the compute stream at Llama-2-7B sizes, and bad shapes are
//! typed errors.
#![cfg(feature = "sim")]

use braid::scenarios::devices::{sim_devices, sim_node, Role};
use braid::scenarios::tensor_parallel::{self, Mode, Shape, TensorParallelError, TOLERANCE};

#[test]
fn the_sharded_step_matches_one_device_on_2_4_and_8_devices() {
    for n in [2, 4, 8] {
        let devices = sim_devices(&sim_node(Role::Data, n)).unwrap();
        let check = tensor_parallel::check(&devices, &Shape::small()).unwrap();
        assert_eq!(check.devices, n as usize);
        assert!(check.correct(), "{n} devices: {check:?}");
        // The numbers really moved: a sharded sum rounds differently from the unsharded one,
        // but far inside the tolerance.
        assert!(check.overlap_error < TOLERANCE / 4.0, "{check:?}");
        assert_eq!(check.graph_error, check.overlap_error, "{check:?}");
    }
}

#[test]
fn the_check_fails_on_devices_that_do_not_compute() {
    // Timing-only devices read back zeros, the reference's too: nothing is checked, and the
    // check must say so rather than compare zeros with zeros.
    let devices = sim_devices(&sim_node(Role::Timing, 2)).unwrap();
    let check = tensor_parallel::check(&devices, &Shape::small()).unwrap();
    assert_eq!(check.reference_magnitude, 0.0, "{check:?}");
    assert!(!check.correct(), "{check:?}");
    let data = sim_devices(&sim_node(Role::Data, 2)).unwrap();
    let check = tensor_parallel::check(&data, &Shape::small()).unwrap();
    assert!(check.reference_magnitude > 0.0, "{check:?}");
}

#[test]
fn overlapping_the_all_reduce_beats_the_compute_stream_at_llama2_7b_sizes() {
    let shape = Shape::llama2_7b();
    let mut previous: Option<f64> = None;
    for n in [2, 4, 8] {
        let devices = sim_devices(&sim_node(Role::Timing, n)).unwrap();
        let t = tensor_parallel::time(&devices, &shape).unwrap();
        assert_eq!(t.devices, n as usize);
        assert!(t.overlap_us < t.serial_us, "{t:?}");
        // The overlap saves a good part of the step, not a rounding error.
        assert!(t.overlap_us < 0.8 * t.serial_us, "{t:?}");
        // The graph replays the overlapped schedule: the communication stream still runs
        // beside the compute stream. The host pays the launch of the whole graph up front,
        // where the eager launches hide behind the device's work.
        assert!(t.graph_us < 0.8 * t.serial_us, "{t:?}");
        assert!(t.graph_us < 1.05 * t.overlap_us, "{t:?}");
        for mode in Mode::ALL {
            assert!(
                t.us(mode).is_finite() && t.us(mode) > 0.0,
                "{mode:?}: {t:?}"
            );
        }
        // More devices, smaller shards: each step is faster.
        if let Some(p) = previous {
            assert!(t.overlap_us < p, "{t:?} after {p}");
        }
        previous = Some(t.overlap_us);
        // Deterministic: the same run on a fresh node gives the same figures.
        let again =
            tensor_parallel::time(&sim_devices(&sim_node(Role::Timing, n)).unwrap(), &shape);
        assert_eq!(again.unwrap(), t);
    }
}

#[test]
fn a_shape_that_does_not_shard_is_a_typed_error_and_the_devices_stay_usable() {
    let devices = sim_devices(&sim_node(Role::Data, 4)).unwrap();
    let uneven = Shape {
        hidden: 66,
        ..Shape::small()
    };
    let err = tensor_parallel::check(&devices, &uneven).unwrap_err();
    assert!(
        matches!(err, TensorParallelError::Uneven { devices: 4, shape } if shape == uneven),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("does not shard over 4 device(s)"),
        "{err}"
    );
    let odd_batch = Shape {
        batch: 3,
        ..Shape::small()
    };
    assert!(matches!(
        tensor_parallel::time(&devices, &odd_batch),
        Err(TensorParallelError::Uneven { .. })
    ));
    assert!(matches!(
        tensor_parallel::check::<braid::sim::SimBackend>(&[], &Shape::small()),
        Err(TensorParallelError::Uneven { devices: 0, .. })
    ));
    // The devices still work.
    assert!(tensor_parallel::check(&devices, &Shape::small())
        .unwrap()
        .correct());
}

#[test]
fn the_graph_beats_both_eager_ways_at_a_decode_batch() {
    // 32 tokens: each matmul takes about as long as its launch, the host sets the pace, and
    // the graph, launched once per device, removes the per-call cost.
    let shape = Shape {
        batch: 32,
        ..Shape::llama2_7b()
    };
    for n in [2, 4] {
        let devices = sim_devices(&sim_node(Role::Timing, n)).unwrap();
        let t = tensor_parallel::time(&devices, &shape).unwrap();
        assert!(t.graph_us < t.serial_us, "{t:?}");
        assert!(t.graph_us < t.overlap_us, "{t:?}");
    }
}
