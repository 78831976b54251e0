//! The simulated runtime's settings, read from the environment once, at first use, and
//! validated: a value that is not what a variable takes is a [`SettingError`] naming the
//! variable and the value, which every ACL call then returns (as
//! `ACL_ERROR_INVALID_PARAM` with the text in `aclGetRecentErrMsg`), never a silent default.
//!
//! braid's rule for every `BRAID_*` variable holds here too: unset means the default; a
//! variable set to nothing (or blanks) is an error naming it, never read as unset.

use braid_backend_sim::Profile;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Environment variable: number of devices of the simulated node, 1 to [`MAX_DEVICES`]
/// (default 8, the NPUs of one Atlas A2 server).
pub const DEVICES_ENV: &str = "BRAID_ACL_SIM_DEVICES";
/// Environment variable: memory of each simulated device in bytes, positive (default: the
/// simulator's default profile's memory, 60.97 GiB of a 64 GiB 910B).
pub const CAPACITY_ENV: &str = "BRAID_ACL_SIM_CAPACITY";
/// Environment variable: comma-separated ids of the devices that run in the simulator's
/// timing-only mode (no data stored or computed, so model-sized shapes plan in milliseconds;
/// read-backs are zeros). Unset or `none`: every device computes data, so a program written
/// for an NPU (a collective over several devices, a read-back from `npu:1`) runs unchanged.
pub const TIMING_ONLY_ENV: &str = "BRAID_ACL_SIM_TIMING_ONLY";
/// The most devices [`DEVICES_ENV`] may ask for.
pub const MAX_DEVICES: usize = 64;
/// Environment variable: the SoC name `aclrtGetSocName` answers, one of [`SOC_NAMES`]
/// (default [`DEFAULT_SOC`]). Clients pick their code paths by it (torch_npu refuses a name
/// it does not know), so only names of the Atlas A2/A3 family the simulator's device profile
/// models are taken.
pub const SOC_ENV: &str = "BRAID_ACL_SIM_SOC";
/// The SoC names [`SOC_ENV`] takes: the Ascend 910B family (Atlas A2) and the 910_93 family
/// (Atlas A3), whose runtime behaviour braid-acl-sim follows.
pub const SOC_NAMES: &[&str] = &[
    "Ascend910B1",
    "Ascend910B2",
    "Ascend910B2C",
    "Ascend910B3",
    "Ascend910B4",
    "Ascend910B4-1",
    "Ascend910_9391",
    "Ascend910_9392",
    "Ascend910_9381",
    "Ascend910_9382",
    "Ascend910_9372",
    "Ascend910_9362",
];
/// The SoC name when [`SOC_ENV`] is unset.
pub const DEFAULT_SOC: &str = "Ascend910B4";
/// Environment variable: a file the sanitizer's reports are written to, as JSON, when the
/// program calls `aclFinalize` (or, failing that, when the process exits). Unset: none.
pub const RACE_REPORT_ENV: &str = "BRAID_ACL_SIM_RACE_REPORT";
/// Environment variable: a file every failed call is appended to, one line each (`<code>
/// <message>`, the message naming the call), as it happens. Unset: none.
pub const ERROR_LOG_ENV: &str = "BRAID_ACL_SIM_ERROR_LOG";
/// Environment variable: a file the simulated timeline is written to, as Chrome Trace Event
/// JSON for Perfetto, when the program calls `aclFinalize` (or when the process exits).
/// Unset: none, and no timeline is recorded.
pub const TIMELINE_ENV: &str = "BRAID_ACL_SIM_TIMELINE";
/// Environment variable: how long, in milliseconds, a host synchronization waits for the
/// other ranks of a collective to issue their parts before failing naming them (the
/// simulator's `HCCL_EXEC_TIMEOUT`). Unset: [`HCCL_EXEC_TIMEOUT_ENV`] if that is set, else
/// [`braid_backend_sim::DEFAULT_COLLECTIVE_TIMEOUT`], 5 s (a missing rank fails a test in
/// seconds, where HCCL's own default waits half an hour). Ranks that are threads of one busy
/// process (torch_npu's process groups issue from a task-queue thread each) may need longer
/// on a loaded machine.
pub const COLLECTIVE_TIMEOUT_ENV: &str = "BRAID_ACL_SIM_COLLECTIVE_TIMEOUT_MS";
/// CANN's environment variable for the same wait, honoured when [`COLLECTIVE_TIMEOUT_ENV`] is
/// unset: whole seconds from 0 to 2147483647, 0 waiting without end (its meaning on Atlas A2
/// with the host expanding the collectives; CANN's default there is 1836 s).
pub const HCCL_EXEC_TIMEOUT_ENV: &str = "HCCL_EXEC_TIMEOUT";
/// The largest `HCCL_EXEC_TIMEOUT` CANN accepts on Atlas A2.
const HCCL_EXEC_TIMEOUT_MAX_S: u64 = 2_147_483_647;

/// Environment variable: a profile file (the format of the shipped profiles, and what
/// `braid calibrate` writes) whose device and node figures the simulated devices take in place
/// of the shipped Atlas 800T A2 profile's. Unset: the shipped profile.
pub const PROFILE_ENV: &str = "BRAID_ACL_SIM_PROFILE";

/// Environment variable: the most host memory the simulated devices' data may take, every
/// device of the process together, in bytes (positive). An allocation past it fails with
/// `ACL_ERROR_RT_DEVICE_OOM` naming this variable, before the host runs out. Unset: three
/// quarters of what the machine can still give the process
/// (`braid_backend_sim::host_budget::default_budget`).
pub const HOST_MEMORY_ENV: &str = "BRAID_ACL_SIM_HOST_MEMORY";

const DEFAULT_DEVICES: usize = 8;

/// The memory of a device when [`CAPACITY_ENV`] is unset: a default simulated device's, i.e.
/// what the runtime of the default profile's NPU reports.
#[cfg(test)]
fn default_capacity() -> u64 {
    braid_backend_sim::SimConfig::new().capacity
}

/// A setting whose value is not one its variable takes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SettingError {
    /// The variable.
    pub variable: &'static str,
    /// Its value, as set.
    pub value: String,
    /// What it takes.
    pub expected: String,
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "braid-acl-sim: {}={:?} is not valid: expected {}",
            self.variable, self.value, self.expected
        )
    }
}

impl std::error::Error for SettingError {}

/// The validated settings.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct Settings {
    /// The profile of the devices and their node.
    pub profile: Profile,
    /// Number of devices.
    pub device_count: usize,
    /// Memory of each device in bytes: [`CAPACITY_ENV`], else the profile's memory.
    pub capacity: u64,
    /// Whether [`CAPACITY_ENV`] set the capacity (else a device in data mode has at most
    /// the host-memory budget: its bytes are host memory).
    pub capacity_is_explicit: bool,
    /// Per device: whether it runs timing-only.
    pub timing_only: Vec<bool>,
    /// What `aclrtGetSocName` answers.
    pub soc: &'static str,
    /// Where the sanitizer's reports go at finalization.
    pub race_report: Option<PathBuf>,
    /// Where the timeline goes at finalization (and whether one is recorded).
    pub timeline: Option<PathBuf>,
    /// How long a synchronization waits for a collective's other ranks.
    pub collective_timeout: Duration,
    /// The host-memory budget of the devices' data ([`HOST_MEMORY_ENV`]).
    pub host_memory: u64,
}

impl Settings {
    /// The settings from the environment `env` (`|k| std::env::var_os(k)` in the library).
    /// Unset variables take their defaults; one set to nothing is an error naming it.
    pub fn from_env(env: impl Fn(&str) -> Option<OsString>) -> Result<Settings, SettingError> {
        let text =
            |variable: &'static str, expected: &str| -> Result<Option<String>, SettingError> {
                let error = |value: String| SettingError {
                    variable,
                    value,
                    expected: expected.to_string(),
                };
                match env(variable) {
                    None => Ok(None),
                    Some(value) => match value.into_string() {
                        Ok(value) if value.trim().is_empty() => Err(error(value)),
                        Ok(value) => Ok(Some(value)),
                        Err(value) => Err(error(value.to_string_lossy().into_owned())),
                    },
                }
            };
        let number = |variable: &'static str, expected: &str, valid: &dyn Fn(u64) -> bool| {
            let Some(value) = text(variable, expected)? else {
                return Ok(None);
            };
            match value.trim().parse::<u64>() {
                Ok(n) if valid(n) => Ok(Some(n)),
                _ => Err(SettingError {
                    variable,
                    value,
                    expected: expected.to_string(),
                }),
            }
        };
        let devices_expected =
            format!("a number of devices from 1 to {MAX_DEVICES} (unset for the default, {DEFAULT_DEVICES})");
        let device_count = number(DEVICES_ENV, &devices_expected, &|n| {
            (1..=MAX_DEVICES as u64).contains(&n)
        })?
        .map_or(DEFAULT_DEVICES, |n| n as usize);
        let profile_expected =
            "a profile file (unset for the default, the shipped Atlas 800T A2 profile)";
        let profile = match text(PROFILE_ENV, profile_expected)? {
            None => Profile::atlas_800t_a2().clone(),
            Some(value) => Profile::from_file(value.trim()).map_err(|e| SettingError {
                variable: PROFILE_ENV,
                expected: format!("{profile_expected}; it does not load: {e}"),
                value,
            })?,
        };
        let explicit_capacity = number(
            CAPACITY_ENV,
            "a positive number of bytes (unset for the default, the profile's memory; in data mode at most the host-memory budget)",
            &|n| n > 0,
        )?;
        let capacity = explicit_capacity.unwrap_or(profile.device.memory_bytes);
        let host_memory = number(
            HOST_MEMORY_ENV,
            "a positive number of bytes (unset for the default, three quarters of the host memory available)",
            &|n| n > 0,
        )?
        .unwrap_or_else(braid_backend_sim::host_budget::default_budget);
        let ids_expected = format!(
            "comma-separated device ids below {device_count} (the device count), or `none` \
             for no timing-only device (unset for the default, none)"
        );
        let timing_only = parse_timing_only(text(TIMING_ONLY_ENV, &ids_expected)?, device_count)
            .map_err(|value| SettingError {
                variable: TIMING_ONLY_ENV,
                value,
                expected: ids_expected,
            })?;
        let braid_timeout = number(
            COLLECTIVE_TIMEOUT_ENV,
            "a number of milliseconds (unset for the default: HCCL_EXEC_TIMEOUT if set, else 5000)",
            &|_| true,
        )?
        .map(Duration::from_millis);
        let collective_timeout = match braid_timeout {
            Some(timeout) => timeout,
            None => number(
                HCCL_EXEC_TIMEOUT_ENV,
                "whole seconds from 0 (no end) to 2147483647, as CANN takes it on Atlas A2 (unset for the \
                 default, 5000 ms)",
                &|n| n <= HCCL_EXEC_TIMEOUT_MAX_S,
            )?
            .map_or(braid_backend_sim::DEFAULT_COLLECTIVE_TIMEOUT, |seconds| {
                if seconds == 0 {
                    Duration::MAX
                } else {
                    Duration::from_secs(seconds)
                }
            }),
        };
        let socs_expected = format!(
            "one of {} (unset for the default, {DEFAULT_SOC})",
            SOC_NAMES.join(", ")
        );
        let soc = match text(SOC_ENV, &socs_expected)? {
            None => DEFAULT_SOC,
            Some(value) => SOC_NAMES
                .iter()
                .copied()
                .find(|name| *name == value.trim())
                .ok_or(SettingError {
                    variable: SOC_ENV,
                    value,
                    expected: socs_expected,
                })?,
        };
        let path = |variable: &'static str| {
            text(variable, "a file path (unset for the default: none)")
                .map(|v| v.map(PathBuf::from))
        };
        // The error log is opened where failures are recorded (`errmsg`); its value is
        // checked here, with the others, so that one set to nothing stops initialisation.
        path(ERROR_LOG_ENV)?;
        Ok(Settings {
            profile,
            device_count,
            capacity,
            capacity_is_explicit: explicit_capacity.is_some(),
            timing_only,
            soc,
            race_report: path(RACE_REPORT_ENV)?,
            timeline: path(TIMELINE_ENV)?,
            collective_timeout,
            host_memory,
        })
    }
}

/// Which of `device_count` devices run timing-only, from the value of [`TIMING_ONLY_ENV`]
/// (`None`: unset). An entry that is not a device id fails with the value.
fn parse_timing_only(value: Option<String>, device_count: usize) -> Result<Vec<bool>, String> {
    let mut out = vec![false; device_count];
    let Some(value) = value else {
        return Ok(out);
    };
    if value.trim().eq_ignore_ascii_case("none") {
        return Ok(out);
    }
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        match entry.parse::<usize>().ok().and_then(|id| out.get_mut(id)) {
            Some(slot) => *slot = true,
            None => return Err(value),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<Settings, SettingError> {
        Settings::from_env(|k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn unset_variables_take_the_defaults() {
        // The 910B profile's memory: what the runtime reports of its 64 GiB.
        assert_eq!(
            default_capacity(),
            braid_backend_sim::Profile::atlas_800t_a2()
                .device
                .memory_bytes
        );
        let s = settings(&[]).unwrap();
        assert_eq!((s.device_count, s.capacity), (8, default_capacity()));
        // Every device computes unless named timing-only.
        assert_eq!(s.timing_only, vec![false; 8]);
    }

    #[test]
    fn a_variable_set_to_nothing_is_an_error_never_the_default() {
        for variable in [
            DEVICES_ENV,
            CAPACITY_ENV,
            TIMING_ONLY_ENV,
            SOC_ENV,
            RACE_REPORT_ENV,
            TIMELINE_ENV,
            ERROR_LOG_ENV,
            COLLECTIVE_TIMEOUT_ENV,
            HCCL_EXEC_TIMEOUT_ENV,
            PROFILE_ENV,
        ] {
            for value in ["", " "] {
                let err = settings(&[(variable, value)]).unwrap_err();
                assert_eq!((err.variable, err.value.as_str()), (variable, value));
                assert!(err.to_string().contains("unset for the default"), "{err}");
            }
        }
        assert!(settings(&[(TIMING_ONLY_ENV, "")])
            .unwrap_err()
            .to_string()
            .contains("`none` for no timing-only device"));
    }

    #[test]
    fn a_profile_file_sets_the_profile_and_the_default_capacity() {
        let gpu = Profile::generic_gpu();
        let file = std::env::temp_dir().join(format!("braid-settings-{}.json", std::process::id()));
        std::fs::write(&file, gpu.to_json()).unwrap();
        let path = file.to_str().unwrap();
        let s = settings(&[(PROFILE_ENV, path)]).unwrap();
        let capped = settings(&[(PROFILE_ENV, path), (CAPACITY_ENV, "4096")]).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(s.profile.name, gpu.name);
        assert_eq!(s.capacity, gpu.device.memory_bytes);
        assert_eq!(capped.capacity, 4096, "an explicit capacity is honoured");
        assert!(capped.capacity_is_explicit && !s.capacity_is_explicit);
        assert_eq!(
            settings(&[]).unwrap().profile.name,
            Profile::atlas_800t_a2().name
        );
        let missing = settings(&[(PROFILE_ENV, "/nonexistent/p.json")]).unwrap_err();
        assert_eq!(missing.variable, PROFILE_ENV);
        assert!(missing.to_string().contains("does not load"), "{missing}");
    }

    #[test]
    fn valid_values_are_taken() {
        let s = settings(&[
            (DEVICES_ENV, " 3 "),
            (CAPACITY_ENV, "1048576"),
            (TIMING_ONLY_ENV, "0, 2"),
        ])
        .unwrap();
        assert_eq!((s.device_count, s.capacity), (3, 1 << 20));
        assert_eq!(s.timing_only, vec![true, false, true]);
        for none in ["none", " NONE "] {
            assert_eq!(
                settings(&[(TIMING_ONLY_ENV, none)]).unwrap().timing_only,
                vec![false; 8]
            );
        }
        let one = settings(&[(DEVICES_ENV, "1")]).unwrap();
        assert_eq!(one.timing_only, vec![false]);
        assert_eq!(settings(&[(DEVICES_ENV, "64")]).unwrap().device_count, 64);
        assert_eq!(
            settings(&[]).unwrap().collective_timeout,
            braid_backend_sim::DEFAULT_COLLECTIVE_TIMEOUT
        );
        assert_eq!(
            settings(&[(COLLECTIVE_TIMEOUT_ENV, "60000")])
                .unwrap()
                .collective_timeout,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn cann_s_exec_timeout_is_honoured_unless_braid_s_own_is_set() {
        let timeout = |pairs: &[(&str, &str)]| settings(pairs).unwrap().collective_timeout;
        assert_eq!(
            timeout(&[(HCCL_EXEC_TIMEOUT_ENV, "120")]),
            Duration::from_secs(120)
        );
        assert_eq!(timeout(&[(HCCL_EXEC_TIMEOUT_ENV, "0")]), Duration::MAX);
        assert_eq!(
            timeout(&[(HCCL_EXEC_TIMEOUT_ENV, "2147483647")]),
            Duration::from_secs(2_147_483_647)
        );
        assert_eq!(
            timeout(&[
                (HCCL_EXEC_TIMEOUT_ENV, "120"),
                (COLLECTIVE_TIMEOUT_ENV, "250")
            ]),
            Duration::from_millis(250)
        );
        // braid's own variable wins even over a value CANN would refuse.
        assert_eq!(
            timeout(&[
                (HCCL_EXEC_TIMEOUT_ENV, "x"),
                (COLLECTIVE_TIMEOUT_ENV, "250")
            ]),
            Duration::from_millis(250)
        );
        for bad in ["2147483648", "1.5", "-1", "30s"] {
            let err = settings(&[(HCCL_EXEC_TIMEOUT_ENV, bad)]).unwrap_err();
            assert_eq!(
                (err.variable, err.value.as_str()),
                (HCCL_EXEC_TIMEOUT_ENV, bad)
            );
            assert!(err.to_string().contains("whole seconds from 0"), "{err}");
        }
    }

    #[test]
    fn the_soc_name_is_one_of_the_family_and_paths_are_taken_as_given() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.soc, DEFAULT_SOC);
        assert_eq!((s.race_report, s.timeline), (None, None));
        let s = settings(&[
            (SOC_ENV, "Ascend910_9391"),
            (RACE_REPORT_ENV, "/tmp/races.json"),
            (TIMELINE_ENV, "trace.json"),
        ])
        .unwrap();
        assert_eq!(s.soc, "Ascend910_9391");
        assert_eq!(s.race_report, Some(PathBuf::from("/tmp/races.json")));
        assert_eq!(s.timeline, Some(PathBuf::from("trace.json")));
        for bad in ["Ascend310P3", "Ascend910A", "ascend910b4", "x"] {
            let err = settings(&[(SOC_ENV, bad)]).unwrap_err();
            assert_eq!((err.variable, err.value.as_str()), (SOC_ENV, bad));
            assert!(err.to_string().contains("one of Ascend910B1,"), "{err}");
        }
    }

    #[test]
    fn invalid_values_are_errors_naming_the_variable_and_the_value() {
        for (pairs, variable, value) in [
            (vec![(DEVICES_ENV, "abc")], DEVICES_ENV, "abc"),
            (vec![(DEVICES_ENV, "0")], DEVICES_ENV, "0"),
            (vec![(DEVICES_ENV, "65")], DEVICES_ENV, "65"),
            (vec![(DEVICES_ENV, "-2")], DEVICES_ENV, "-2"),
            (vec![(CAPACITY_ENV, "-1")], CAPACITY_ENV, "-1"),
            (vec![(CAPACITY_ENV, "0")], CAPACITY_ENV, "0"),
            (vec![(CAPACITY_ENV, "16GiB")], CAPACITY_ENV, "16GiB"),
            (vec![(TIMING_ONLY_ENV, "x,1")], TIMING_ONLY_ENV, "x,1"),
            (
                vec![(COLLECTIVE_TIMEOUT_ENV, "5s")],
                COLLECTIVE_TIMEOUT_ENV,
                "5s",
            ),
            (
                vec![(DEVICES_ENV, "2"), (TIMING_ONLY_ENV, "2")],
                TIMING_ONLY_ENV,
                "2",
            ),
        ] {
            let err = settings(&pairs).unwrap_err();
            assert_eq!((err.variable, err.value.as_str()), (variable, value));
            let text = err.to_string();
            assert!(text.contains(&format!("{variable}=\"{value}\"")), "{text}");
        }
        assert!(settings(&[(DEVICES_ENV, "abc")])
            .unwrap_err()
            .to_string()
            .contains("expected a number of devices from 1 to 64"));
    }
}
