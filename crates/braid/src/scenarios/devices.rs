//! The devices braid's examples and `braid demo` run the scenarios on: chosen by cargo feature
//! ([`open`], [`race_reports`], [`describe`]), or named ([`sim`], and `acl` with the `acl`
//! feature).
//!
//! A scenario uses two kinds of device ([`Role`]): one that computes real numbers, where
//! results are checked at small shapes, and one where model-sized shapes are timed.
//! Multi-device scenarios open `n` devices of one node for a role ([`open_node`],
//! [`sim_node`], `acl_devices`): on the simulator a fresh node of `n` devices of the role's
//! configuration; through ACL devices from [`DATA_NODE_BASE`] or [`TIMING_NODE_BASE`] where
//! the library has them, else `0..n` (see [`ACL_SIM_NODE_SETTINGS`] for `braid-acl-sim`).
//!
//! | role | simulator (`sim`) | ACL (`acl`) |
//! |---|---|---|
//! | [`Role::Data`] | a fresh simulated device, data mode | ACL device [`DATA_ORDINAL`] (0) |
//! | [`Role::Timing`] | a fresh timing-only simulated device (64 GiB) | ACL device [`TIMING_ORDINAL`] (1); device 0 where there is only one |
//!
//! With `acl` on, [`open`] opens ACL devices (ACL is [`crate::DefaultBackend`] then), else
//! simulated ones. ACL is loaded with
//! `braid_backend_acl::AclApi::load_or_sim`: `$BRAID_ACL_LIB`, else CANN
//! under `$ASCEND_HOME_PATH` / `$ASCEND_TOOLKIT_HOME`, `libascendcl.so` on the loader path,
//! and only when none of these is set or there, `libbraid_acl_sim.so` when `braid-acl-sim`
//! was built next to the running executable (a configured library that fails, or a CANN home
//! without one, is the error, never replaced by the simulator); a failure is `StreamError::Backend` with `HalError::Native { name:
//! "BRAID_ACL_LIBRARY_UNAVAILABLE", .. }` listing every path tried.
//!
//! On hardware device 1 is simply a second NPU, where the timing is real. On `braid-acl-sim`
//! it is timing-only under [`ACL_SIM_NODE_SETTINGS`] (`BRAID_ACL_SIM_TIMING_ONLY`, see
//! `braid_acl_sim`), which braid's examples and `braid demo --backend acl` set when unset, so
//! model-sized runs plan in milliseconds as on the simulator, and the simulated times are the
//! simulator's.
//!
//! Race reports: on the simulator, its sanitizer's ([`crate::sim_race_reports`]); through ACL,
//! the same sanitizer's behind `braid-acl-sim` (`braid::acl_race_reports`), `None` on CANN,
//! which has no race detector to ask. ACL devices live as long as the process, so `acl`
//! clears a device's reports when it opens it: each run counts its own, as on a fresh
//! simulated device.

use crate::{Device, Result};

/// What a scenario needs the device for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// Computing real numbers, to check results (small shapes).
    Data,
    /// Timing model-sized shapes (timing-only on the simulators).
    Timing,
}

/// The ACL device of [`Role::Data`].
pub const DATA_ORDINAL: u32 = 0;

/// The ACL device of [`Role::Timing`] (device 0 where ACL reports only one). On
/// `braid-acl-sim` it is timing-only under [`ACL_SIM_NODE_SETTINGS`], which the examples and
/// `braid demo --backend acl` set.
pub const TIMING_ORDINAL: u32 = 1;

/// Capacity of the timing-only simulated device: room for model-sized shapes.
#[cfg(feature = "sim")]
pub const TIMING_CAPACITY: u64 = 64 << 30;

/// A fresh simulated device for `role`: data mode, or timing-only with [`TIMING_CAPACITY`].
#[cfg(feature = "sim")]
pub fn sim(role: Role) -> Result<Device<braid_backend_sim::SimBackend>> {
    use braid_backend_sim::{SimConfig, SimMode};
    crate::sim_device(match role {
        Role::Data => SimConfig::new(),
        Role::Timing => SimConfig::new()
            .capacity(TIMING_CAPACITY)
            .mode(SimMode::TimingOnly),
    })
}

/// The ACL device for `role` of the library
/// [`AclApi::load_or_sim`](braid_backend_acl::AclApi::load_or_sim) finds, with its sanitizer
/// reports cleared (see the [module docs](self)).
#[cfg(feature = "acl")]
pub fn acl(role: Role) -> Result<Device<braid_backend_acl::AclBackend>> {
    let api = braid_backend_acl::AclApi::load_or_sim()
        .map_err(|e| crate::hal::HalError::from(braid_backend_acl::OpenError::Load(e)))?;
    acl_with(api, role)
}

/// [`acl`] on the library `api` (tests pass `braid-acl-sim` explicitly).
#[cfg(feature = "acl")]
pub fn acl_with(
    api: &'static braid_backend_acl::AclApi,
    role: Role,
) -> Result<Device<braid_backend_acl::AclBackend>> {
    use crate::hal::HalError;
    use braid_backend_acl::{AclConfig, AclDevice, OpenError};
    let open = |ordinal| AclDevice::open_with(api, ordinal, AclConfig::default());
    let hal = match role {
        Role::Data => open(DATA_ORDINAL),
        Role::Timing => match open(TIMING_ORDINAL) {
            Err(OpenError::NoSuchDevice { count: 1, .. }) => open(DATA_ORDINAL),
            other => other,
        },
    }
    .map_err(HalError::from)?;
    hal.clear_sanitizer_reports().map_err(HalError::from)?;
    Device::new(hal)
}

/// Devices of a simulated node for `role`, all with the configuration [`sim`] gives a single
/// device, in one Atlas 800T A2 server ([`Topology::atlas_800_a2`]): open them with
/// [`sim_devices`]. The node gives the timeline of every device
/// (`SimNode::chrome_trace_json`, one process per device).
///
/// [`Topology::atlas_800_a2`]: braid_backend_sim::Topology::atlas_800_a2
#[cfg(feature = "sim")]
pub fn sim_node(role: Role, devices: u32) -> braid_backend_sim::SimNode {
    use braid_backend_sim::{NodeConfig, SimConfig, SimMode, SimNode, Topology};
    let config = match role {
        Role::Data => SimConfig::new(),
        Role::Timing => SimConfig::new()
            .capacity(TIMING_CAPACITY)
            .mode(SimMode::TimingOnly),
    };
    SimNode::new(
        NodeConfig::new(devices)
            .device(config)
            .topology(Topology::atlas_800_a2(devices)),
    )
}

/// Every device of `node`, opened.
#[cfg(feature = "sim")]
pub fn sim_devices(
    node: &braid_backend_sim::SimNode,
) -> Result<Vec<Device<braid_backend_sim::SimBackend>>> {
    node.devices().into_iter().map(Device::new).collect()
}

/// The first ACL device of a [`Role::Data`] node in `acl_devices`, where the library has
/// `DATA_NODE_BASE + n` devices or more (else the node is devices `0..n`).
pub const DATA_NODE_BASE: u32 = 8;

/// The first ACL device of a [`Role::Timing`] node in `acl_devices`, where the library has
/// `TIMING_NODE_BASE + n` devices or more (else the node is devices `0..n`).
pub const TIMING_NODE_BASE: u32 = 16;

/// The `braid-acl-sim` settings under which `acl_devices` finds a data node and a timing
/// node beside the single devices of `acl`: 24 devices, of which 1 and 16–23 are
/// timing-only. Device 0 computes and device 1 times ([`DATA_ORDINAL`], [`TIMING_ORDINAL`]); devices 8–15 are the
/// data node and 16–23 the timing node (each mode is a simulated node of its own, and a
/// communicator's devices must all be of one). Set them in the environment before the
/// library's first call: braid's examples and `braid demo --backend acl` do when they are
/// unset (`braid-acl-sim`'s own default is that every device computes).
pub const ACL_SIM_NODE_SETTINGS: [(&str, &str); 2] = [
    ("BRAID_ACL_SIM_DEVICES", "24"),
    ("BRAID_ACL_SIM_TIMING_ONLY", "1,16,17,18,19,20,21,22,23"),
];

/// Sets [`ACL_SIM_NODE_SETTINGS`] in this process's environment where they are unset. Call
/// it before anything loads ACL, while no other thread reads the environment.
pub fn set_acl_sim_node_settings() {
    for (variable, value) in ACL_SIM_NODE_SETTINGS {
        if std::env::var_os(variable).is_none() {
            std::env::set_var(variable, value);
        }
    }
}

/// `n` ACL devices of one node for `role` of the library
/// [`AclApi::load_or_sim`](braid_backend_acl::AclApi::load_or_sim) finds.
#[cfg(feature = "acl")]
pub fn acl_devices(role: Role, n: u32) -> Result<Vec<Device<braid_backend_acl::AclBackend>>> {
    let api = braid_backend_acl::AclApi::load_or_sim()
        .map_err(|e| crate::hal::HalError::from(braid_backend_acl::OpenError::Load(e)))?;
    acl_devices_with(api, role, n)
}

/// [`acl_devices`] on the library `api`: devices `base..base + n`, where `base` is
/// [`DATA_NODE_BASE`] or [`TIMING_NODE_BASE`] for the role when the library has that many
/// devices (on `braid-acl-sim` under [`ACL_SIM_NODE_SETTINGS`]), else 0 (on an 8-NPU server
/// the same devices compute and time). Each device's sanitizer reports are cleared, as
/// [`acl_with`] does.
#[cfg(feature = "acl")]
pub fn acl_devices_with(
    api: &'static braid_backend_acl::AclApi,
    role: Role,
    n: u32,
) -> Result<Vec<Device<braid_backend_acl::AclBackend>>> {
    use crate::hal::HalError;
    use braid_backend_acl::{AclConfig, AclDevice, OpenError};
    let open = |ordinal| AclDevice::open_with(api, ordinal, AclConfig::default());
    let preferred = match role {
        Role::Data => DATA_NODE_BASE,
        Role::Timing => TIMING_NODE_BASE,
    };
    let base = match open(preferred + n.max(1) - 1) {
        Err(OpenError::NoSuchDevice { .. }) => 0,
        Err(other) => return Err(HalError::from(other).into()),
        Ok(_) => preferred,
    };
    (base..base + n)
        .map(|ordinal| {
            let hal = open(ordinal).map_err(HalError::from)?;
            hal.clear_sanitizer_reports().map_err(HalError::from)?;
            Device::new(hal)
        })
        .collect()
}

/// `n` devices of one node for `role` on the backend the features select: `acl_devices`
/// with `acl` on, else [`sim_devices`] of a fresh [`sim_node`].
pub fn open_node(role: Role, n: u32) -> Result<Vec<Device<Backend>>> {
    #[cfg(feature = "acl")]
    return acl_devices(role, n);
    #[cfg(not(feature = "acl"))]
    return sim_devices(&sim_node(role, n));
}

/// The backend of [`open`]: [`crate::DefaultBackend`].
pub type Backend = crate::DefaultBackend;

/// A device for `role` on the backend the features select: `acl` with `acl` on, else
/// [`sim`].
pub fn open(role: Role) -> Result<Device<Backend>> {
    #[cfg(feature = "acl")]
    return acl(role);
    #[cfg(not(feature = "acl"))]
    return sim(role);
}

/// The race detector's reports of a run on `device` (`braid::acl_race_reports` with `acl`
/// on, else [`crate::sim_race_reports`]); `None` where the backend has none to ask.
pub fn race_reports(device: &Device<Backend>) -> Option<Vec<String>> {
    #[cfg(feature = "acl")]
    return crate::acl_race_reports(device);
    #[cfg(not(feature = "acl"))]
    return crate::sim_race_reports(device);
}

/// The body of the `custom_op` scenario's RMSNorm for [`Backend`]: a host function on the
/// simulator, `aclnnRmsNorm` on the native stream through ACL.
pub fn rms_norm_body(
    args: super::custom_op::RmsNormArgs,
) -> Result<std::sync::Arc<<Backend as crate::hal::Backend>::OpBody>> {
    #[cfg(feature = "acl")]
    return super::custom_op::acl_body(args);
    #[cfg(not(feature = "acl"))]
    return super::custom_op::sim_body(args);
}

/// One line naming what [`open`] runs on: the simulator and its profile, or ACL and the
/// library file (`describe_acl`, with the `acl` feature; a load failure is described, not
/// returned: [`open`] returns it).
pub fn describe() -> String {
    #[cfg(feature = "acl")]
    return match braid_backend_acl::AclApi::load_or_sim() {
        Ok(api) => describe_acl(api),
        Err(e) => format!("ACL (not loaded: {e})"),
    };
    #[cfg(not(feature = "acl"))]
    return format!(
        "the simulated device ({})",
        braid_backend_sim::DeviceProfile::ascend_910b().name
    );
}

/// What the ACL library `api` is: `ACL on the simulator (braid-acl-sim: <path>, profile
/// <name>)` for `braid-acl-sim` (whose simulated devices run the simulator's default profile,
/// or the one `BRAID_ACL_SIM_PROFILE` names, so every figure it gives names it), `ACL
/// (<path>)` for CANN.
#[cfg(feature = "acl")]
pub fn describe_acl(api: &braid_backend_acl::AclApi) -> String {
    if api.is_braid_acl_sim() {
        let profile = acl_sim_profile();
        format!(
            "ACL on the simulator (braid-acl-sim: {}, profile {profile})",
            api.path().display()
        )
    } else {
        format!("ACL ({})", api.path().display())
    }
}

/// The name of the profile braid-acl-sim's devices take in this process: the file
/// `BRAID_ACL_SIM_PROFILE` names (its profile's name where the simulator is built in to read
/// it), else the shipped default's.
#[cfg(feature = "acl")]
fn acl_sim_profile() -> String {
    let Some(path) = std::env::var_os("BRAID_ACL_SIM_PROFILE") else {
        #[cfg(feature = "sim")]
        return braid_backend_sim::DeviceProfile::ascend_910b()
            .name
            .to_string();
        #[cfg(not(feature = "sim"))]
        return "the simulator's default".to_string();
    };
    let path = std::path::PathBuf::from(path);
    #[cfg(feature = "sim")]
    if let Ok(profile) = braid_backend_sim::Profile::from_file(&path) {
        return format!("{} from {}", profile.name, path.display());
    }
    format!("from {}", path.display())
}

#[cfg(all(test, feature = "sim", not(feature = "acl")))]
mod tests {
    #[test]
    fn the_description_names_the_profile_the_figures_come_from() {
        assert_eq!(
            super::describe(),
            "the simulated device (atlas-800t-a2)",
            "examples print it above their simulated figures"
        );
    }
}
