//! Sleep mode between rollout and training: a model's weights (a sleepable pool tagged
//! `weights`) are offloaded to pinned host memory and its KV cache (tagged `kv_cache`)
//! discarded, their device memory released and their addresses kept; after the wake a graph
//! captured over both replays with the same results. See `braid::scenarios::sleep_mode`.
//!
//! `cargo run -p braid --example sleep_mode` (add `--features acl` to run it through ACL).

use braid::scenarios::devices::{self, Role};
use braid::scenarios::sleep_mode::{self, Shape};

fn main() -> Result<(), braid::Report> {
    let shape = Shape::default();
    println!(
        "running on {}, in {}",
        devices::describe(),
        sleep_mode::DTYPE
    );
    println!(
        "weights {}x{}, {} tokens, KV cache {} MiB",
        shape.out_features,
        shape.in_features,
        shape.tokens,
        shape.kv_bytes >> 20
    );
    let o = sleep_mode::run(&devices::open(Role::Data)?, shape)?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "reserved: awake {:.2} MiB, asleep {:.2} MiB",
        mib(o.reserved_awake),
        mib(o.reserved_asleep)
    );
    println!(
        "device memory in use: awake {:.2} MiB, asleep {:.2} MiB; offloaded {:.2} MiB",
        mib(o.device_used.0),
        mib(o.device_used.1),
        mib(o.offloaded_bytes)
    );
    println!(
        "same addresses after the wake: {}; replay after the wake matches: {}",
        o.same_addresses, o.correct
    );
    println!(
        "RESULT reserved_awake={} reserved_asleep={} correct={}",
        o.reserved_awake, o.reserved_asleep, o.correct
    );
    Ok(())
}
