//! braid-allocator's integration tests, one test binary: each module is one subject
//! (`cargo test -p braid-allocator --test allocator -- sleep::` runs one). A new subject is a
//! file beside this one and a `mod` line below (ARCHITECTURE.md, "Tests"). The binary's global
//! allocator counts host allocations per thread (`common::host_allocs`).

mod common;

mod caching_core;
mod checkpoint;
mod config;
mod cross_stream;
mod drop_release;
mod expandable;
mod faults;
mod fit_large_segments;
mod fuzz;
mod hot_path;
mod ipc_refs;
mod lifetime_placement;
mod oom_hint;
mod peer;
mod pinned_host;
mod plain_path;
mod pool_per_thread;
mod private_pools;
mod release_before_grow;
mod sanitizer_lifetimes;
mod sleep;
mod split_large_remainders;
mod use_on_oom;
mod workspace;
