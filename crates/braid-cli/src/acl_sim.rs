//! `braid acl-sim install --dir DIR`: hands braid-acl-sim (`libbraid_acl_sim.so`, ACL's C API
//! on braid's simulator) to programs outside braid's cargo builds: braid's own downstream
//! programs (through `BRAID_ACL_LIB`) and CANN clients nobody here wrote, such as torch_npu,
//! which find CANN's libraries by file name (through `LD_LIBRARY_PATH`).
//!
//! Cargo builds the library beside this binary (`target/<profile>/deps/`). The command copies
//! it once into the directory (so the directory outlives the build that made it), checks that
//! the copy loads as braid-acl-sim, makes each of CANN's library names a relative symbolic
//! link to it, and prints the environment to set. Links rather than copies matter: the
//! dynamic loader opens a file reached under two names once (it compares the files' device
//! and inode), so torch_npu's `libascendcl.so`, `libhccl.so` and `libopapi.so` are one library
//! with one simulated runtime, and an HCCL call sees the streams ACL made.

use braid::acl::{sim_library_candidates, AclApi, SIM_LIB_NAME};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file names of the CANN libraries torch_npu 2.14 needs: linked at load time (with
/// `BIND_NOW`) by its libraries, or opened at run time (`libopapi.so` for aclnn operators,
/// `libnnopbase.so` for their descriptors). braid-acl-sim's Python package makes the same
/// names (`CANN_LIBRARY_NAMES` in python/braid-acl-sim/src/braid_acl_sim/layout.py; a test
/// checks the two lists agree).
pub const CANN_LIBRARY_NAMES: &[&str] = &[
    "libascendcl.so",
    "libhccl.so",
    "libacl_op_compiler.so",
    "libge_runner.so",
    "libgraph.so",
    "libacl_tdt_channel.so",
    "libopapi.so",
    "libnnopbase.so",
];

/// The most devices torch_npu 2.14 handles (`C10_COMPILE_TIME_MAX_NPUS`); it refuses more at
/// initialization.
pub const TORCH_NPU_MAX_DEVICES: u32 = 32;

/// What `braid acl-sim` can do.
#[derive(Subcommand)]
pub enum AclSimCommand {
    /// Copies libbraid_acl_sim.so into DIR, checks that the copy loads as braid-acl-sim, links
    /// CANN's library names to it (libascendcl.so, libhccl.so, libacl_op_compiler.so,
    /// libge_runner.so, libgraph.so, libacl_tdt_channel.so, libopapi.so, libnnopbase.so: what
    /// torch_npu loads) and prints the environment to set, as shell `export` lines:
    /// `eval "$(braid acl-sim install --dir DIR)"`.
    ///
    /// The library is libbraid_acl_sim.so next to this binary (or in deps/ beside it, where
    /// `cargo build -p braid-cli` puts it), or the one `--lib` names. A file of the directory
    /// that has a CANN library's name and is not a link is never replaced: the command fails
    /// naming it.
    Install(InstallArgs),
}

/// Arguments of `braid acl-sim install`.
#[derive(Args)]
pub struct InstallArgs {
    /// The directory to lay the libraries out in (made if missing).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The library to install, instead of libbraid_acl_sim.so beside this binary.
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// The number of simulated devices (BRAID_ACL_SIM_DEVICES), 1 to 32: torch_npu handles
    /// at most 32. Unset: braid-acl-sim's default, 8.
    #[arg(long)]
    devices: Option<u32>,
}

/// Why an install failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// This binary has no `libbraid_acl_sim.so` beside it.
    #[error(
        "{SIM_LIB_NAME} is not beside this braid binary (looked at {}): run the braid that \
         cargo builds in braid's repository (`cargo build --release -p braid-cli`, then \
         `target/release/braid acl-sim install --dir DIR`; `cargo install` copies the binary \
         alone), or pass --lib",
        .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotBuilt {
        /// Where it was looked for.
        tried: Vec<PathBuf>,
    },
    /// `--lib` names no file.
    #[error("--lib {0}: no such file")]
    NoSuchLibrary(PathBuf),
    /// A file with a CANN library's name is in the way.
    #[error("{0} exists and is not a link: it is never replaced (is a CANN install in this directory? choose another one)")]
    InTheWay(PathBuf),
    /// The device count is one torch_npu cannot use.
    #[error("--devices {0}: torch_npu handles 1 to {TORCH_NPU_MAX_DEVICES} devices")]
    Devices(u32),
    /// A file system operation failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path it failed on.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The copy does not load as braid-acl-sim.
    #[error("the copy at {} does not load as braid-acl-sim: {reason}", .path.display())]
    Unusable {
        /// The copy.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The library to install: `lib` if given, else libbraid_acl_sim.so beside an executable in
/// `exe_dir`.
pub fn library(lib: Option<&Path>, exe_dir: &Path) -> Result<PathBuf, InstallError> {
    if let Some(lib) = lib {
        return if lib.is_file() {
            Ok(lib.to_path_buf())
        } else {
            Err(InstallError::NoSuchLibrary(lib.to_path_buf()))
        };
    }
    let tried = sim_library_candidates(exe_dir);
    tried
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or(InstallError::NotBuilt { tried })
}

/// Lays `lib` out in `dir`: a copy named [`SIM_LIB_NAME`] and a relative link to it under
/// each of [`CANN_LIBRARY_NAMES`]. Returns the copy's absolute path. Nothing is changed when
/// a file with a CANN name is in the way.
pub fn lay_out(lib: &Path, dir: &Path) -> Result<PathBuf, InstallError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let dir = dir.canonicalize().map_err(io(dir))?;
    for name in CANN_LIBRARY_NAMES {
        let path = dir.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_symlink() {
                return Err(InstallError::InTheWay(path));
            }
        }
    }
    let target = dir.join(SIM_LIB_NAME);
    // Through a temporary name, so a program that has the old copy mapped keeps a whole file.
    let staging = dir.join(format!(".{SIM_LIB_NAME}.{}", std::process::id()));
    std::fs::copy(lib, &staging).map_err(io(&staging))?;
    std::fs::rename(&staging, &target).map_err(io(&target))?;
    for name in CANN_LIBRARY_NAMES {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        std::os::unix::fs::symlink(SIM_LIB_NAME, &path).map_err(io(&path))?;
    }
    Ok(target)
}

/// Checks that the library at `path` loads as braid-acl-sim (ACL's symbols and braid's
/// extension symbols).
pub fn check_loads(path: &Path) -> Result<(), InstallError> {
    let unusable = |reason: String| InstallError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    let api = AclApi::load_from(path).map_err(|e| unusable(e.to_string()))?;
    if !api.is_braid_acl_sim() {
        return Err(unusable("it lacks braid's extension symbols".to_string()));
    }
    Ok(())
}

/// The shell lines that make programs load the library installed at `installed` (a file of
/// the directory [`lay_out`] filled), with `devices` simulated devices where given (else
/// braid-acl-sim's default, 8, every one computing data, as torch_npu needs; braid's own
/// scenarios then choose their devices' modes themselves).
pub fn environment(installed: &Path, devices: Option<u32>) -> String {
    let dir = installed.parent().unwrap_or(Path::new(".")).display();
    let devices = devices.map_or_else(
        || "# BRAID_ACL_SIM_DEVICES unset: 8 devices\n".to_string(),
        |n| format!("export BRAID_ACL_SIM_DEVICES={n}\n"),
    );
    format!(
        "# braid-acl-sim is installed in {dir}: {SIM_LIB_NAME}, and CANN's library names linked to it.\n\
         # eval \"$(braid acl-sim install --dir ...)\" sets this environment; start programs after it.\n\
         # Programs that load ACL through braid (braid::acl, braid demo --backend acl):\n\
         export BRAID_ACL_LIB={installed}\n\
         # CANN clients (torch_npu) find the libraries by name; every device computes, as an\n\
         # NPU does (braid-acl-sim's default):\n\
         export LD_LIBRARY_PATH={dir}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n\
         {devices}\
         # optional: BRAID_ACL_SIM_SOC=Ascend910B4 (the SoC name torch_npu sees),\n\
         #           BRAID_ACL_SIM_RACE_REPORT=races.json, BRAID_ACL_SIM_TIMELINE=timeline.json\n",
        installed = installed.display()
    )
}

/// Runs a `braid acl-sim` command, writing its output to `out`.
pub fn run(
    command: &AclSimCommand,
    out: &mut impl Write,
) -> Result<bool, Box<dyn std::error::Error>> {
    match command {
        AclSimCommand::Install(args) => {
            if let Some(devices) = args.devices {
                if !(1..=TORCH_NPU_MAX_DEVICES).contains(&devices) {
                    return Err(InstallError::Devices(devices).into());
                }
            }
            let exe_dir = std::env::current_exe()?
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let lib = library(args.lib.as_deref(), &exe_dir)?;
            let installed = lay_out(&lib, &args.dir)?;
            check_loads(&installed)?;
            tracing::info!(installed = %installed.display(), lib = %lib.display(), "braid-acl-sim installed");
            write!(out, "{}", environment(&installed, args.devices))?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("braid-install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_cann_name_links_to_one_copy_and_a_second_install_replaces_the_links() {
        let root = scratch("links");
        let lib = root.join("libsim.so");
        std::fs::write(&lib, b"first").unwrap();
        let installed = lay_out(&lib, &root.join("cann")).unwrap();
        assert_eq!(
            installed,
            root.join("cann").canonicalize().unwrap().join(SIM_LIB_NAME)
        );
        let dir = installed.parent().unwrap();
        for name in CANN_LIBRARY_NAMES {
            let path = dir.join(name);
            assert_eq!(std::fs::read_link(&path).unwrap(), Path::new(SIM_LIB_NAME));
            assert_eq!(std::fs::read(&path).unwrap(), b"first");
        }
        std::fs::write(&lib, b"second").unwrap();
        lay_out(&lib, dir).unwrap();
        assert_eq!(std::fs::read(dir.join("libhccl.so")).unwrap(), b"second");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_python_package_links_the_same_cann_names() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../python/braid-acl-sim/src/braid_acl_sim/layout.py");
        let source = std::fs::read_to_string(&path).unwrap();
        let list = source
            .split("CANN_LIBRARY_NAMES = (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_else(|| panic!("{} has no CANN_LIBRARY_NAMES tuple", path.display()));
        let names: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
        assert_eq!(names, CANN_LIBRARY_NAMES);
    }

    #[test]
    fn a_file_in_the_way_is_never_replaced() {
        let root = scratch("in-the-way");
        let lib = root.join("libsim.so");
        std::fs::write(&lib, b"sim").unwrap();
        let dir = root.join("cann");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libhccl.so"), b"a real CANN library").unwrap();
        let err = lay_out(&lib, &dir).unwrap_err();
        assert!(
            matches!(err, InstallError::InTheWay(ref p) if p.ends_with("libhccl.so")),
            "{err}"
        );
        assert_eq!(
            std::fs::read(dir.join("libhccl.so")).unwrap(),
            b"a real CANN library"
        );
        assert!(!dir.join("libascendcl.so").exists(), "nothing was laid out");
        assert!(!dir.join(SIM_LIB_NAME).exists(), "nothing was copied");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_library_named_by_lib_that_is_missing_is_named() {
        let err = library(Some(Path::new("/nonexistent/libx.so")), Path::new("/bin")).unwrap_err();
        assert!(matches!(err, InstallError::NoSuchLibrary(_)), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/libx.so"), "{err}");
    }

    #[test]
    fn without_the_library_beside_the_binary_the_error_says_how_to_build_it() {
        let nowhere =
            std::env::temp_dir().join(format!("braid-cli-nowhere-{}", std::process::id()));
        let err = library(None, &nowhere).unwrap_err();
        assert!(matches!(err, InstallError::NotBuilt { .. }), "{err:?}");
        let text = err.to_string();
        let deps = nowhere.join("deps").join(SIM_LIB_NAME);
        assert!(
            text.contains("cargo build --release -p braid-cli")
                && text.contains(&deps.display().to_string()),
            "{text}"
        );
        assert!(!nowhere.exists(), "nothing is created");
    }

    #[test]
    fn a_file_that_is_not_braid_acl_sim_is_refused_naming_it() {
        let root = scratch("unusable");
        let lib = root.join(SIM_LIB_NAME);
        std::fs::write(&lib, b"not a library").unwrap();
        let err = check_loads(&lib).unwrap_err();
        assert!(matches!(err, InstallError::Unusable { .. }), "{err:?}");
        assert!(
            err.to_string().contains(&lib.display().to_string()),
            "{err}"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_environment_serves_braid_programs_and_cann_clients() {
        let text = environment(Path::new("/opt/sim/libbraid_acl_sim.so"), Some(4));
        assert!(text.contains("export BRAID_ACL_LIB=/opt/sim/libbraid_acl_sim.so\n"));
        assert!(
            text.contains("export LD_LIBRARY_PATH=/opt/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n")
        );
        assert!(text.contains("export BRAID_ACL_SIM_DEVICES=4\n"));
        assert!(!text.contains("BRAID_ACL_SIM_TIMING_ONLY"));
        let default = environment(Path::new("/opt/sim/libbraid_acl_sim.so"), None);
        assert!(
            !default.contains("export BRAID_ACL_SIM_DEVICES"),
            "{default}"
        );
        // Everything else is a comment, so the output can be given to `eval`.
        for line in text.lines() {
            assert!(
                line.starts_with("# ") || line.starts_with("export "),
                "{line}"
            );
        }
    }
}
