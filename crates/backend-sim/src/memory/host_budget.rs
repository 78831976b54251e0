//! The host-memory budget of data mode: every simulated device keeps its bytes in host
//! memory, so the process's simulated device memory is host memory. An allocation that
//! would take the process's backed bytes (every device's segments and physical memory,
//! counted at their full size: a segment may be written whole) past the budget is refused
//! with [`HalError::HostMemoryExhausted`], naming the budget and the setting that changes it,
//! before the host runs out: two devices each holding an 8 GiB tensor must not take a 24 GB
//! machine down.
//!
//! The budget is [`SimConfig::host_memory_budget`](crate::SimConfig::host_memory_budget)
//! (`braid-acl-sim`: `BRAID_ACL_SIM_HOST_MEMORY`); by default [`default_budget`]: three
//! quarters of what the machine can still give the process when the first device is made —
//! the smaller of `MemAvailable` (`/proc/meminfo`) and the room left under the process's
//! cgroup memory limit (`memory.max` − `memory.current`, cgroup v2).

use braid_stream_core::hal::HalError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Host bytes backing simulated device memory in this process, every device together.
static IN_USE: AtomicU64 = AtomicU64::new(0);

/// The setting named in refusals.
pub const SETTING: &str =
    "SimConfig::host_memory_budget (braid-acl-sim: BRAID_ACL_SIM_HOST_MEMORY, in bytes)";

/// Host bytes backing simulated device memory in this process now.
pub fn in_use() -> u64 {
    IN_USE.load(Ordering::Relaxed)
}

/// Takes `size` bytes of the budget, or refuses when the process would pass `budget`.
pub(crate) fn reserve(size: u64, budget: u64) -> Result<(), HalError> {
    IN_USE
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(size).filter(|&total| total <= budget)
        })
        .map(|_| ())
        .map_err(|used| HalError::HostMemoryExhausted {
            requested: size,
            in_use: used,
            budget,
            setting: SETTING,
        })
}

/// Gives `size` bytes back.
pub(crate) fn release(size: u64) {
    IN_USE.fetch_sub(size, Ordering::AcqRel);
}

/// The default budget: three quarters of the host memory the process can still get (see
/// the [module](self) docs), measured once; 16 GiB where neither figure can be read.
pub fn default_budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let available = mem_available();
        let cgroup = cgroup_room();
        let room = match (available, cgroup) {
            (Some(a), Some(c)) => a.min(c),
            (Some(a), None) => a,
            (None, Some(c)) => c,
            (None, None) => 16 << 30,
        };
        room / 4 * 3
    })
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// The room left under this process's cgroup v2 memory limit, if it has one.
fn cgroup_room() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("memory.max")).ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max": no limit
    let current: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_bytes_and_the_default_is_below_it() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(parse_meminfo(text), Some(20_000_000 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 5 kB\n"), None);
        let budget = default_budget();
        assert!(budget > 0);
        if let Some(available) = mem_available() {
            assert!(budget <= available, "{budget} > {available}");
        }
    }
}
