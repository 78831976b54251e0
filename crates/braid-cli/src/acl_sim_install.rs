//! `braid acl-sim install --dir DIR`: lays braid-acl-sim out in a directory under the file
//! names of CANN's libraries, so that a CANN client nobody here wrote (torch_npu) loads it
//! as its CANN, and prints the environment to set.
//!
//! The library is copied once into the directory (`libbraid_acl_sim.so`, so the directory
//! outlives the build that made it) and each CANN name is a relative symbolic link to it.
//! Links rather than copies matter: the dynamic loader opens a file reached under two names
//! once (it compares the files' device and inode), so torch_npu's `libascendcl.so`,
//! `libhccl.so` and `libopapi.so` are one library with one simulated runtime, and an HCCL
//! call sees the streams ACL made.

use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file names of the CANN libraries torch_npu 2.14 needs: linked at load time (with
/// `BIND_NOW`) by its libraries, or opened at run time (`libopapi.so` for aclnn operators,
/// `libnnopbase.so` for their descriptors).
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

/// The name the library is copied under in the directory.
pub const INSTALLED_NAME: &str = "libbraid_acl_sim.so";

/// The most devices torch_npu 2.14 handles (`C10_COMPILE_TIME_MAX_NPUS`); it refuses more at
/// initialization.
pub const TORCH_NPU_MAX_DEVICES: u32 = 32;

/// What `braid acl-sim` can do.
#[derive(Subcommand)]
pub enum AclSimCommand {
    /// Lays braid-acl-sim out in a directory as the CANN libraries torch_npu loads
    /// (libascendcl.so, libhccl.so, libacl_op_compiler.so, libge_runner.so, libgraph.so,
    /// libacl_tdt_channel.so, libopapi.so, libnnopbase.so: links to one copy of
    /// libbraid_acl_sim.so) and prints the environment to set, as shell `export` lines:
    /// `eval "$(braid acl-sim install --dir DIR)"`.
    ///
    /// The library is libbraid_acl_sim.so next to this binary (or in deps/ beside it, where
    /// cargo builds it with braid-cli), or the one `--lib` names. A file of the directory
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
    /// at most 32.
    #[arg(long, default_value_t = 8)]
    devices: u32,
}

/// Why an install failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// No library to install was found.
    #[error("libbraid_acl_sim.so was not found (tried {tried}); build it with `cargo build --release -p braid-cli` or pass --lib")]
    LibraryNotFound {
        /// The paths tried, comma-separated.
        tried: String,
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
    #[error("{path}: {source}")]
    Io {
        /// The path it failed on.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The library to install: `lib` if given, else libbraid_acl_sim.so beside the executable
/// running (`exe`).
fn library(lib: Option<&Path>, exe: &Path) -> Result<PathBuf, InstallError> {
    if let Some(lib) = lib {
        return if lib.is_file() {
            Ok(lib.to_path_buf())
        } else {
            Err(InstallError::NoSuchLibrary(lib.to_path_buf()))
        };
    }
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = braid::acl::sim_library_candidates(dir);
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| InstallError::LibraryNotFound {
            tried: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Lays the library out in `dir`: a copy named [`INSTALLED_NAME`] and a relative link to it
/// under each of [`CANN_LIBRARY_NAMES`]. Returns the directory, absolute.
pub fn install(lib: &Path, dir: &Path) -> Result<PathBuf, InstallError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let dir = dir.canonicalize().map_err(io(dir))?;
    // Refuse before changing anything.
    for name in CANN_LIBRARY_NAMES {
        let path = dir.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_symlink() {
                return Err(InstallError::InTheWay(path));
            }
        }
    }
    let target = dir.join(INSTALLED_NAME);
    // Copy through a temporary name, so a running program that has the old copy mapped keeps
    // a consistent file.
    let staging = dir.join(format!(".{INSTALLED_NAME}.{}", std::process::id()));
    std::fs::copy(lib, &staging).map_err(io(&staging))?;
    std::fs::rename(&staging, &target).map_err(io(&target))?;
    for name in CANN_LIBRARY_NAMES {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        std::os::unix::fs::symlink(INSTALLED_NAME, &path).map_err(io(&path))?;
    }
    tracing::info!(dir = %dir.display(), lib = %lib.display(), "braid-acl-sim installed");
    Ok(dir)
}

/// The shell lines that make a program in this environment load the installed libraries.
pub fn environment(dir: &Path, devices: u32) -> String {
    format!(
        "# braid-acl-sim is installed in {dir} under the names of CANN's libraries.\n\
         # Set this environment (eval \"$(braid acl-sim install --dir ...)\") before starting Python:\n\
         export LD_LIBRARY_PATH={dir}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\n\
         export BRAID_ACL_SIM_DEVICES={devices}\n\
         # every device computes real numbers (braid's default makes device 1 timing-only)\n\
         export BRAID_ACL_SIM_TIMING_ONLY=\n\
         # optional: BRAID_ACL_SIM_SOC=Ascend910B4 (the SoC name torch_npu sees),\n\
         #           BRAID_ACL_SIM_RACE_REPORT=races.json, BRAID_ACL_SIM_TIMELINE=timeline.json\n",
        dir = dir.display()
    )
}

/// Runs a `braid acl-sim` command, writing its output to `out`.
pub fn run(
    command: &AclSimCommand,
    out: &mut impl Write,
) -> Result<bool, Box<dyn std::error::Error>> {
    match command {
        AclSimCommand::Install(args) => {
            if !(1..=TORCH_NPU_MAX_DEVICES).contains(&args.devices) {
                return Err(InstallError::Devices(args.devices).into());
            }
            let exe = std::env::current_exe()?;
            let lib = library(args.lib.as_deref(), &exe)?;
            let dir = install(&lib, &args.dir)?;
            write!(out, "{}", environment(&dir, args.devices))?;
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
        let dir = install(&lib, &root.join("cann")).unwrap();
        for name in CANN_LIBRARY_NAMES {
            let path = dir.join(name);
            assert_eq!(
                std::fs::read_link(&path).unwrap(),
                Path::new(INSTALLED_NAME)
            );
            assert_eq!(std::fs::read(&path).unwrap(), b"first");
        }
        std::fs::write(&lib, b"second").unwrap();
        install(&lib, &dir).unwrap();
        assert_eq!(std::fs::read(dir.join("libhccl.so")).unwrap(), b"second");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_file_in_the_way_is_never_replaced() {
        let root = scratch("in-the-way");
        let lib = root.join("libsim.so");
        std::fs::write(&lib, b"sim").unwrap();
        let dir = root.join("cann");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libhccl.so"), b"a real CANN library").unwrap();
        let err = install(&lib, &dir).unwrap_err();
        assert!(
            matches!(err, InstallError::InTheWay(ref p) if p.ends_with("libhccl.so")),
            "{err}"
        );
        assert_eq!(
            std::fs::read(dir.join("libhccl.so")).unwrap(),
            b"a real CANN library"
        );
        assert!(!dir.join("libascendcl.so").exists(), "nothing was laid out");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missing_library_is_named() {
        let err = library(
            Some(Path::new("/nonexistent/libx.so")),
            Path::new("/bin/braid"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/libx.so"), "{err}");
        let err = library(None, Path::new("/nonexistent/bin/braid")).unwrap_err();
        assert!(
            err.to_string()
                .contains("/nonexistent/bin/deps/libbraid_acl_sim.so"),
            "{err}"
        );
    }

    #[test]
    fn the_environment_puts_the_directory_first_on_the_loader_path() {
        let text = environment(Path::new("/opt/sim"), 4);
        assert!(
            text.contains("export LD_LIBRARY_PATH=/opt/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n")
        );
        assert!(text.contains("export BRAID_ACL_SIM_DEVICES=4\n"));
        assert!(text.contains("export BRAID_ACL_SIM_TIMING_ONLY=\n"));
    }
}
