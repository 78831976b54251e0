//! braid-acl-sim's integration tests, through the exported C functions, one test binary:
//! each module is one subject (`cargo test -p braid-acl-sim --test acl_sim -- hccl_threads::`
//! runs one). A new subject is a file beside this one and a `mod` line below
//! (ARCHITECTURE.md, "Tests"). The tests that need settings in the environment or a process
//! of their own run a child of this binary (`settings`, `outputs`).

mod common;

mod attention_aclnn;
mod client_aclnn;
mod client_runtime;
mod format_aclnn;
mod hccl_sub_comm;
mod hccl_threads;
mod host_callbacks;
mod outputs;
mod settings;
