//! Raw device memory freed while a collective still reads it: the rule is documented at
//! `DeviceMemory` (keep it until every collective using it has completed), and what breaks
//! it is reported by the simulator's sanitizer as a use after free that names the
//! collective and its rank.

use crate::common;

use braid_backend_sim::RaceKind;
use braid_collective::ReduceOp;
use braid_stream_core::DType;
use common::*;

#[test]
fn raw_memory_freed_under_a_pending_collective_is_reported_naming_it() {
    let r = Ranks::new(2);
    let (send0, recv0) = (
        r.upload(0, DType::F32, &[1.0; 64]),
        r.zeros(0, DType::F32, 64),
    );
    let (send1, recv1) = (
        r.upload(1, DType::F32, &[2.0; 64]),
        r.zeros(1, DType::F32, 64),
    );
    // Each rank's collective runs on a communication stream of its own, after the uploads.
    let comm: Vec<_> = r
        .devices
        .iter()
        .zip(&r.streams)
        .map(|(d, s)| {
            let c = d.create_stream(0).unwrap();
            c.wait_stream(s).unwrap();
            c
        })
        .collect();
    r.comms[0]
        .all_reduce(&comm[0], &send0, &recv0, DType::F32, ReduceOp::Sum)
        .unwrap();
    // Rank 0 frees its send buffer while the all-reduce still waits for rank 1: dropping raw
    // memory synchronizes its device first, which cannot finish a collective another rank has
    // not joined yet, so the memory goes back to the device with the read still to come.
    drop(send0);
    r.comms[1]
        .all_reduce(&comm[1], &send1, &recv1, DType::F32, ReduceOp::Sum)
        .unwrap();
    r.streams[1].wait_stream(&comm[1]).unwrap();
    assert_eq!(
        r.read(1, recv1.slice(), DType::F32),
        vec![2.0; 64],
        "rank 0's part read from freed memory (zeros): the sum is wrong on rank 1"
    );
    let reports = r.devices[0].hal().sanitizer_reports();
    let texts: Vec<String> = reports.iter().map(ToString::to_string).collect();
    let report = reports
        .iter()
        .find(|x| {
            x.kind == RaceKind::UseAfterFree && x.first.as_ref().is_some_and(|f| f.kind == "free")
        })
        .unwrap_or_else(|| panic!("no use after the free reported: {texts:#?}"));
    let text = report.to_string();
    assert!(
        text.contains("allreduce(sum)") && text.contains("rank 0"),
        "the report names the collective and its rank: {text}"
    );
}
