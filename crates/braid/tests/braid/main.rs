//! The facade's integration tests, one test binary: each module is one subject (`cargo test
//! --workspace --test braid -- fault_soak::` runs one, reusing the workspace's build). A new
//! subject is a file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests"); a
//! module that needs a feature says so with `#![cfg(...)]` at its top. `tests/report_main.rs`
//! is a binary of its own: it has its own `main`.

// The ACL modules' shared helpers: braid-acl-sim and the lock on its process-wide devices.
#[cfg(all(feature = "acl", feature = "sim"))]
mod common;

mod acl;
mod acl_llama_decode;
mod acl_memory;
mod acl_scenarios;
mod acl_tensor_parallel;
mod fault_soak;
mod graph_scenarios;
mod llama_decode;
mod llama_decode_7b;
mod memory;
mod scenarios;
mod tensor_parallel;
