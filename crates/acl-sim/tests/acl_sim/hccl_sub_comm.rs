//! `HcclCreateSubCommConfig` through the exported C API: HCCL's argument rules (null
//! pointers `HCCL_E_PTR`, bad configs and lists `HCCL_E_PARA`) and the handles it makes.

use braid_acl_sim::exports::*;
use braid_acl_sim::hccl::exports::*;
use braid_acl_sys::hccl::codes::{HCCL_E_PARA, HCCL_E_PTR};
use braid_acl_sys::hccl::{HcclComm, HcclCommConfig};
use std::ptr::null_mut;

/// `HcclCreateSubCommConfig` of `ranks` from `parent` as `sub_rank`, with `config`.
fn create(
    parent: HcclComm,
    ranks: &[u32],
    sub_rank: u32,
    mut config: HcclCommConfig,
) -> (i32, HcclComm) {
    let mut parent = parent;
    let mut ids = ranks.to_vec();
    let mut sub = null_mut();
    // SAFETY: live in and out parameters; `ids` holds `ranks.len()` entries.
    let code = unsafe {
        HcclCreateSubCommConfig(
            &mut parent,
            ids.len() as u32,
            ids.as_mut_ptr(),
            5,
            sub_rank,
            &mut config,
            &mut sub,
        )
    };
    (code, sub)
}

#[test]
fn sub_communicators_follow_hccls_argument_rules() {
    let code = aclInit(std::ptr::null());
    assert!(code == 0 || code == 100_002, "aclInit: {code}");
    let mut ids = [0, 1, 2, 3];
    let mut comms: [HcclComm; 4] = [null_mut(); 4];
    // SAFETY: `ids` and `comms` hold 4 entries each.
    let code = unsafe { HcclCommInitAll(4, ids.as_mut_ptr(), comms.as_mut_ptr()) };
    assert_eq!(code, 0);
    let config = HcclCommConfig::default();
    let mut sub = null_mut();
    let mut ranks = [1u32, 3];
    // SAFETY: null pointers are refused before anything is read.
    let null_comm = unsafe {
        HcclCreateSubCommConfig(
            null_mut(),
            2,
            ranks.as_mut_ptr(),
            5,
            0,
            &mut HcclCommConfig::default(),
            &mut sub,
        )
    };
    assert_eq!(null_comm, HCCL_E_PTR);
    let mut parent = comms[1];
    // SAFETY: as above.
    let null_ranks = unsafe {
        HcclCreateSubCommConfig(
            &mut parent,
            2,
            null_mut(),
            5,
            0,
            &mut HcclCommConfig::default(),
            &mut sub,
        )
    };
    assert_eq!(null_ranks, HCCL_E_PTR);
    let mut uninitialized = config;
    uninitialized.reserved = [0; 24];
    assert_eq!(create(comms[1], &[1, 3], 0, uninitialized).0, HCCL_E_PARA);
    assert_eq!(create(comms[1], &[], 0, config).0, HCCL_E_PARA);
    assert_eq!(create(comms[1], &[1, 4], 0, config).0, HCCL_E_PARA);
    assert_eq!(create(comms[1], &[1, 1], 0, config).0, HCCL_E_PARA);
    assert_eq!(create(comms[0], &[1, 3], 0, config).0, HCCL_E_PARA);
    let (code, first) = create(comms[1], &[1, 3], 0, config);
    assert_eq!(code, 0);
    assert_eq!(create(comms[3], &[3, 1], 0, config).0, HCCL_E_PARA);
    let (code, second) = create(comms[3], &[1, 3], 1, config);
    assert_eq!(code, 0);
    for (sub, want) in [(first, 0), (second, 1)] {
        let (mut rank, mut size) = (9, 9);
        // SAFETY: live out parameters.
        assert_eq!(unsafe { HcclGetRankId(sub, &mut rank) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { HcclGetRankSize(sub, &mut size) }, 0);
        assert_eq!((rank, size), (want, 2));
        assert_eq!(HcclCommDestroy(sub), 0);
    }
}
