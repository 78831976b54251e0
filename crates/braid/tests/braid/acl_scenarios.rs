//! The seed scenarios through ACL on `braid-acl-sim` (loaded by path through the real loading
//! path) give the same outcome as on the simulator: the examples' `RESULT` fields, simulated
//! times, and the sanitizer's reports. (Runs with `cargo test -p braid --features acl`, and in
//! `cargo test --workspace`, where braid-cli turns `acl` on.)
//! Both run the built-in kernels in `float16`, as the seeds do (through ACL as aclnn
//! operators), so the comparisons are exact.
#![cfg(all(feature = "acl", feature = "sim"))]

use braid::scenarios::devices::{self, Role};
use braid::scenarios::{custom_op, tagged_events, wait_stream};

use crate::common;
use common::{acl_sim, DEVICES};

#[test]
fn wait_stream_through_acl_matches_the_simulator() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    let shape = wait_stream::Shape::default();
    let sim_shape = shape;
    for with_wait in [false, true] {
        let sim = wait_stream::run_checked(
            &devices::sim(Role::Data).unwrap(),
            sim_shape,
            with_wait,
            braid::sim_race_reports,
        )
        .unwrap();
        let acl = wait_stream::run_checked(
            &devices::acl_with(api, Role::Data).unwrap(),
            shape,
            with_wait,
            braid::acl_race_reports,
        )
        .unwrap();
        assert_eq!(acl.correct, with_wait, "{acl:?}");
        assert_eq!(
            (acl.dtype, sim.dtype),
            (braid::DType::F16, braid::DType::F16)
        );
        assert_eq!(
            (acl.correct, acl.sum, acl.expected, acl.elapsed_us),
            (sim.correct, sim.sum, sim.expected, sim.elapsed_us),
            "with_wait={with_wait}"
        );
        // The same reports: one race without the wait, none with it. (Their addresses, stream
        // numbers and times match too on a fresh device, as in the example; here the other
        // test may have used device 0 first, and ACL devices live as long as the process.)
        let (acl, sim) = (acl.reports.unwrap(), sim.reports.unwrap());
        assert_eq!(acl.len(), sim.len(), "{acl:?} vs {sim:?}");
        assert_eq!(acl.len(), usize::from(!with_wait), "{acl:?}");
        for (a, s) in acl.iter().zip(&sim) {
            assert!(a.contains("read-write race on 32768 bytes"), "{a}");
            assert!(s.contains("read-write race on 32768 bytes"), "{s}");
            // Through ACL the kernels are aclnn operators, named by their operator.
            assert!(
                a.contains("`aclnnMm`") && a.contains("`aclnnReduceSum`"),
                "{a}"
            );
            assert!(s.contains("`matmul`") && s.contains("`reduce_sum`"), "{s}");
        }
    }
}

#[test]
fn tagged_events_through_acl_matches_the_simulator() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    for layout in [
        tagged_events::Layout::MultiStream,
        tagged_events::Layout::SingleStream,
    ] {
        let small = tagged_events::Shape::SMALL;
        let sim_small = small;
        let device = devices::acl_with(api, Role::Data).unwrap();
        let acl = tagged_events::run(&device, small, layout, true).unwrap();
        let results = acl.results.expect("read back");
        assert!(tagged_events::check(small, &results), "{layout:?}");
        assert_eq!(braid::acl_race_reports(&device), Some(vec![]), "{layout:?}");
        let sim = tagged_events::run(&devices::sim(Role::Data).unwrap(), sim_small, layout, true)
            .unwrap();
        assert_eq!(Some(results), sim.results, "{layout:?}");
        assert_eq!(acl.makespan_us, sim.makespan_us, "{layout:?}");

        // The model-sized timing run, on ACL device 1 (timing-only on braid-acl-sim).
        let model = tagged_events::Shape::MODEL;
        let sim_model = model;
        let acl = tagged_events::run(
            &devices::acl_with(api, Role::Timing).unwrap(),
            model,
            layout,
            false,
        )
        .unwrap();
        let sim = tagged_events::run(
            &devices::sim(Role::Timing).unwrap(),
            sim_model,
            layout,
            false,
        )
        .unwrap();
        assert_eq!(acl.makespan_us, sim.makespan_us, "{layout:?}");
    }
}

#[test]
fn memory_reuse_through_acl_matches_the_simulator() {
    use braid::allocator::AllocatorConfig;
    use braid::scenarios::memory_reuse::{self, Decoder};
    let _turn = DEVICES.lock();
    let api = acl_sim();
    let (check, size) = (Decoder::check(), Decoder::llama7b_width());
    let acl = memory_reuse::run_on(
        |role| devices::acl_with(api, role),
        braid::acl_race_reports,
        &AllocatorConfig::new(),
        check,
        size,
    )
    .unwrap();
    let sim = memory_reuse::run(check, size).unwrap();
    assert_eq!(acl, sim);
    assert!(acl.identical() && acl.reports() == Some(0), "{acl:?}");
}

#[test]
fn custom_op_through_aclnn_matches_the_simulator() {
    let _turn = DEVICES.lock();
    let api = acl_sim();
    let device = devices::acl_with(api, Role::Data).unwrap();
    let acl = custom_op::run(&device, custom_op::acl_body, braid::acl_race_reports).unwrap();
    let sim = custom_op::run(
        &devices::sim(Role::Data).unwrap(),
        custom_op::sim_body,
        braid::sim_race_reports,
    )
    .unwrap();
    for run in [&acl, &sim] {
        assert!(run.correct && run.replay_correct, "{run:?}");
        assert_eq!(run.reports, Some(0), "{run:?}");
        assert!(run.race_reports.is_some_and(|n| n >= 1), "{run:?}");
    }
    // Every descriptor and executor the closure made is gone.
    let live = braid::acl::aclnn::AclnnApi::load_for(api)
        .unwrap()
        .live_objects()
        .expect("braid-acl-sim counts its aclnn objects");
    assert_eq!(live, [0; 4]);
}
