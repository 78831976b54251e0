//! Ranks of one communicator as threads of one process (torch_npu's process groups in one
//! program, one thread per rank): a rank waiting for a collective must not stop the other
//! ranks from issuing their parts.
//!
//! Devices 2 and 3 are used (every device computes data under the default settings).

use braid_acl_sim::client::runtime::aclrtMemcpy;
use braid_acl_sim::exports::*;
use braid_acl_sim::hccl::exports::*;
use braid_acl_sys::hccl::{HcclComm, HcclRootInfo, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM};
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
const COUNT: usize = 64;

fn message() -> String {
    let p = aclGetRecentErrMsg();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated, valid until the next call on this thread.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn ok(code: i32) {
    assert_eq!(code, 0, "{}", message());
}

/// One rank on `device`: joins, puts `rank + 1` in every element, all-reduces them on a
/// stream of its own, and returns what the synchronize after it answered, the time it took
/// and the result read back. `issued` is reached by rank 0 once its part is issued and by
/// rank 1 before it issues its own: rank 1 issues while rank 0 already waits.
fn rank(
    device: i32,
    rank: u32,
    info: HcclRootInfo,
    issued: Arc<Barrier>,
) -> (i32, Duration, Vec<f32>) {
    let code = aclInit(std::ptr::null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    ok(aclrtSetDevice(device));
    let mut comm: HcclComm = null_mut();
    // SAFETY: live in and out parameters.
    ok(unsafe { HcclCommInitRootInfo(2, &info, rank, &mut comm) });
    let bytes = COUNT * 4;
    let mut buf = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtMalloc(&mut buf, bytes, 0) });
    let host = vec![(rank + 1) as f32; COUNT];
    // SAFETY: `buf` is device memory of `bytes`, `host` is `bytes` long.
    ok(unsafe {
        aclrtMemcpy(
            buf,
            bytes,
            host.as_ptr().cast::<c_void>(),
            bytes,
            ACL_MEMCPY_HOST_TO_DEVICE,
        )
    });
    let mut stream = null_mut();
    // SAFETY: a live out parameter.
    ok(unsafe { aclrtCreateStream(&mut stream) });
    if rank == 1 {
        issued.wait();
        // Rank 0 is now inside its synchronize.
        std::thread::sleep(Duration::from_millis(200));
    }
    ok(HcclAllReduce(
        buf,
        buf,
        COUNT as u64,
        HCCL_DATA_TYPE_FP32,
        HCCL_REDUCE_SUM,
        comm,
        stream,
    ));
    if rank == 0 {
        issued.wait();
    }
    let start = Instant::now();
    let code = aclrtSynchronizeStream(stream);
    let waited = start.elapsed();
    if code != 0 {
        eprintln!("rank {rank}: {}", message());
    }
    let mut out = vec![0f32; COUNT];
    // SAFETY: as above, the other way.
    ok(unsafe {
        aclrtMemcpy(
            out.as_mut_ptr().cast::<c_void>(),
            bytes,
            buf,
            bytes,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    });
    ok(aclrtDestroyStream(stream));
    ok(aclrtFree(buf));
    ok(HcclCommDestroy(comm));
    (code, waited, out)
}

#[test]
fn a_rank_waiting_for_a_collective_lets_the_other_ranks_of_its_process_issue() {
    let code = aclInit(std::ptr::null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    ok(aclrtSetDevice(2));
    let mut info = HcclRootInfo::default();
    // SAFETY: a live out parameter.
    ok(unsafe { HcclGetRootInfo(&mut info) });
    let issued = Arc::new(Barrier::new(2));
    let ranks: Vec<_> = [(2, 0), (3, 1)]
        .into_iter()
        .map(|(device, r)| {
            let issued = issued.clone();
            std::thread::spawn(move || rank(device, r, info, issued))
        })
        .collect();
    for handle in ranks {
        let (code, waited, out) = handle.join().unwrap();
        assert_eq!(code, 0, "the synchronize after the collective succeeds");
        assert!(
            waited < braid_backend_sim::DEFAULT_COLLECTIVE_TIMEOUT,
            "waited {waited:?}: the wait ended when the other rank issued, not at the timeout"
        );
        assert_eq!(out, vec![3.0; COUNT]);
    }
}
