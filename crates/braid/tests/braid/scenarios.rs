//! The seed scenarios behave as their examples claim.

use braid::scenarios::{tagged_events, wait_stream};
use braid::sim::{SimConfig, SimMode};

#[test]
fn wait_stream_is_wrong_without_the_wait_and_right_with_it() {
    let shape = wait_stream::Shape {
        m: 32,
        k: 16,
        n: 8,
        earlier_work_ns: 200_000,
        ..wait_stream::Shape::default()
    };
    let without =
        wait_stream::run(&braid::sim_device(SimConfig::new()).unwrap(), shape, false).unwrap();
    let with =
        wait_stream::run(&braid::sim_device(SimConfig::new()).unwrap(), shape, true).unwrap();
    assert!(
        !without.correct,
        "the side stream must read c before the matmul wrote it: {without:?}"
    );
    assert_eq!(without.sum, 0.0);
    assert!(with.correct, "{with:?}");
    assert_eq!(with.sum, wait_stream::expected_sum(shape));
    assert!(
        with.elapsed_us >= 200.0,
        "the earlier work is part of the measured time: {with:?}"
    );
}

#[test]
fn the_sanitizer_reports_the_missing_wait_and_nothing_else() {
    let shape = wait_stream::Shape {
        m: 16,
        k: 16,
        n: 16,
        earlier_work_ns: 50_000,
        ..wait_stream::Shape::default()
    };
    let run = |with_wait| {
        wait_stream::run_checked(
            &braid::sim_device(SimConfig::new()).unwrap(),
            shape,
            with_wait,
            braid::sim_race_reports,
        )
        .unwrap()
        .reports
        .unwrap()
    };
    let without = run(false);
    assert_eq!(without.len(), 1, "{without:?}");
    assert!(
        without[0].contains("read-write race") && without[0].contains("`matmul`"),
        "{without:?}"
    );
    assert_eq!(run(true), Vec::<String>::new());
    for layout in [
        tagged_events::Layout::MultiStream,
        tagged_events::Layout::SingleStream,
    ] {
        let device = braid::sim_device(SimConfig::new()).unwrap();
        tagged_events::run(&device, tagged_events::Shape::SMALL, layout, true).unwrap();
        assert_eq!(braid::sim_race_reports(&device), Some(vec![]), "{layout:?}");
    }
}

#[test]
fn wait_stream_is_deterministic() {
    let shape = wait_stream::Shape {
        m: 16,
        k: 16,
        n: 16,
        earlier_work_ns: 50_000,
        ..wait_stream::Shape::default()
    };
    let a = wait_stream::run(&braid::sim_device(SimConfig::new()).unwrap(), shape, true).unwrap();
    let b = wait_stream::run(&braid::sim_device(SimConfig::new()).unwrap(), shape, true).unwrap();
    assert_eq!(a.elapsed_us, b.elapsed_us);
    assert_eq!(a.sum, b.sum);
}

#[test]
fn tagged_events_results_are_correct_on_both_layouts() {
    for layout in [
        tagged_events::Layout::MultiStream,
        tagged_events::Layout::SingleStream,
    ] {
        let device = braid::sim_device(SimConfig::new()).unwrap();
        let run = tagged_events::run(&device, tagged_events::Shape::SMALL, layout, true).unwrap();
        let results = run.results.expect("read back");
        assert!(
            tagged_events::check(tagged_events::Shape::SMALL, &results),
            "{layout:?}"
        );
    }
}

#[test]
fn tagged_stream_overlaps_the_matmul_with_the_second_add() {
    let timing = |layout| {
        let device = braid::sim_device(
            SimConfig::new()
                .capacity(64 << 30)
                .mode(SimMode::TimingOnly),
        )
        .unwrap();
        tagged_events::run(&device, tagged_events::Shape::MODEL, layout, false)
            .unwrap()
            .makespan_us
    };
    let multi = timing(tagged_events::Layout::MultiStream);
    let single = timing(tagged_events::Layout::SingleStream);
    assert!(
        multi < single * 0.95,
        "multi {multi} us vs single {single} us"
    );
}

#[test]
fn a_wrong_result_is_detected_by_check() {
    let shape = tagged_events::Shape::SMALL;
    let device = braid::sim_device(SimConfig::new()).unwrap();
    let mut results = tagged_events::run(&device, shape, tagged_events::Layout::MultiStream, true)
        .unwrap()
        .results
        .unwrap();
    results.mm_result[7] += 1.0;
    assert!(!tagged_events::check(shape, &results));
}

#[test]
fn the_seeds_compute_in_float16_and_a_one_ulp_error_is_detected() {
    use braid::DType;
    let shape = wait_stream::Shape {
        m: 16,
        k: 16,
        n: 16,
        earlier_work_ns: 10_000,
        ..wait_stream::Shape::default()
    };
    assert_eq!(shape.dtype, DType::F16);
    let run = wait_stream::run(&braid::sim_device(SimConfig::new()).unwrap(), shape, true).unwrap();
    assert_eq!((run.dtype, run.sum, run.expected), (DType::F16, 16.0, 16.0));
    // The same scenario in float32 gives the same (exact) sum.
    let single = wait_stream::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        wait_stream::Shape {
            dtype: DType::F32,
            ..shape
        },
        true,
    )
    .unwrap();
    assert_eq!((single.dtype, single.sum), (DType::F32, 16.0));

    // tagged_events checks exactly: the next float16 after the matmul's 8 is wrong.
    let small = tagged_events::Shape::SMALL;
    assert_eq!(small.dtype, DType::F16);
    let device = braid::sim_device(SimConfig::new()).unwrap();
    let mut results = tagged_events::run(&device, small, tagged_events::Layout::MultiStream, true)
        .unwrap()
        .results
        .unwrap();
    assert!(tagged_events::check(small, &results));
    assert_eq!(results.mm_result[0], 8.0);
    results.mm_result[0] = 8.0 + 2f32.powi(-7);
    assert_eq!(DType::F16.round(results.mm_result[0]), results.mm_result[0]);
    assert!(!tagged_events::check(small, &results));
}

#[test]
fn record_tagged_stream_keeps_a_alive_and_its_absence_is_reported() {
    use braid::scenarios::record_tagged_stream;
    let with = record_tagged_stream::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        true,
        braid::sim_race_reports,
    )
    .unwrap();
    assert!(with.b_correct && with.c_correct, "{with:?}");
    assert!(
        !with.c_reused_a,
        "A's block must stay reserved until the second stream read it"
    );
    assert_eq!(
        with.reports.as_deref(),
        Some(&[][..]),
        "no sanitizer report with the record"
    );

    let without = record_tagged_stream::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        false,
        braid::sim_race_reports,
    )
    .unwrap();
    assert!(without.c_reused_a, "without the record C takes A's block");
    assert!(!without.b_correct, "B reads C's data: {without:?}");
    let reports = without.reports.expect("the simulator has a sanitizer");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains("use after free") && reports[0].contains("B = A + 1"),
        "{reports:?}"
    );
}

#[test]
fn automatic_mode_needs_no_record_stream_and_manual_mode_is_caught() {
    use braid::allocator::CrossStreamMode;
    use braid::scenarios::cross_stream_lifetime;
    let auto = cross_stream_lifetime::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        CrossStreamMode::Automatic,
        braid::sim_race_reports,
    )
    .unwrap();
    assert!(auto.correct && !auto.z_reused_x, "{auto:?}");
    assert_eq!(auto.reports.as_deref(), Some(&[][..]));
    assert!(
        auto.events_recorded >= 1,
        "the side stream was still busy at the free: {auto:?}"
    );

    let manual = cross_stream_lifetime::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        CrossStreamMode::Manual,
        braid::sim_race_reports,
    )
    .unwrap();
    assert!(!manual.correct && manual.z_reused_x, "{manual:?}");
    assert_eq!(manual.events_recorded, 0);
    let reports = manual.reports.expect("sanitizer");
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].contains("use after free"), "{reports:?}");
}

#[test]
fn a_user_operator_runs_on_two_streams_is_captured_and_its_race_reported() {
    use braid::scenarios::custom_op;
    let run = custom_op::run(
        &braid::sim_device(SimConfig::new()).unwrap(),
        custom_op::sim_body,
        braid::sim_race_reports,
    )
    .unwrap();
    assert!(run.correct && run.replay_correct, "{run:?}");
    assert_eq!(run.reports, Some(0), "{run:?}");
    assert!(run.race_reports.unwrap() >= 1, "{run:?}");
}

#[test]
fn the_custom_op_reference_is_rms_norm() {
    use braid::scenarios::custom_op::{reference, COLS, ROWS};
    // Each row of 3s normalises to 1 (times gamma), with rstd = 1/3.
    let x = vec![3.0; (ROWS * COLS) as usize];
    let gamma = vec![2.0; COLS as usize];
    let (y, rstd) = reference(&x, &gamma);
    assert!(y.iter().all(|&v| (v - 2.0).abs() < 1e-3), "{y:?}");
    assert!(
        rstd.iter().all(|&r| (r - 1.0 / 3.0).abs() < 1e-6),
        "{rstd:?}"
    );
}
