//! What the ACL test binaries share: `braid-acl-sim` found next to the test executable, and
//! the lock that makes their tests take turns on the process-wide ACL devices.

use braid::acl::{sim_library_candidates, AclApi};
use braid::core::sync::GlobalMutex;

/// ACL devices are process-wide: the tests of a binary take turns.
pub static DEVICES: GlobalMutex<()> = GlobalMutex::new(());

/// `braid-acl-sim`, built as a dev-dependency into `target/<profile>/deps`, next to the test.
pub fn acl_sim() -> &'static AclApi {
    // The scenarios time model-sized work on device 1: timing-only under the node settings,
    // set before the library's first call reads them.
    static SETTINGS: std::sync::Once = std::sync::Once::new();
    SETTINGS.call_once(braid::scenarios::devices::set_acl_sim_node_settings);
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().expect("in a directory");
    let path = sim_library_candidates(dir)
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libbraid_acl_sim.so not built next to {}", exe.display()));
    AclApi::load_from(path).expect("braid-acl-sim loads")
}
