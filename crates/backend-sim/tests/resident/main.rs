//! The tests that measure this process's resident set, in a test binary of their own (no
//! other test's memory is counted), taking turns ([`ALONE`]).

mod peak;
mod resident_memory;
mod scale;

/// Held by each test that measures the resident set, so that they do not count each other's
/// memory.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`ALONE`] (a test that panicked while holding it does not poison the others).
fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
