//! braid-backend-acl's integration tests on `braid-acl-sim`, one test binary: each module is
//! one subject (`cargo test -p braid-backend-acl --test backend_acl -- hccl::` runs one). A
//! new subject is a file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests").
//! The library reads its settings from the environment once per process: the tests that set
//! them (`tests/loading.rs`, `tests/sim_settings.rs`, `tests/acl_sim_mixed_modes.rs`) are
//! binaries of their own, and no module here sets any.

mod common;

mod acl_sim;
mod acl_sim_default_modes;
mod aclnn_add;
mod collective;
mod conformance;
mod hccl;
mod hccl_group;
mod ipc_processes;
mod native_handles;
mod task_groups;
mod vmm;
mod workspace;
