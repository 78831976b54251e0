//! braid-conformance's integration tests, one test binary: the suite on the simulator, its
//! threads, and the child-process helper (`cargo test -p braid-conformance --test
//! conformance -- sim::` runs one). A new subject is a file beside this one and a `mod` line
//! below (ARCHITECTURE.md, "Tests"). `tests/model_check.rs` is a binary of its own, built only
//! with the `model-check` feature (braid's locks are then shuttle's, which work only inside
//! the model checker's runs).

mod child_process;
mod sim;
mod threads;
