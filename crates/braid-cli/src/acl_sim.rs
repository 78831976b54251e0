//! `braid acl-sim install --dir DIR`: hands braid-acl-sim (`libbraid_acl_sim.so`, ACL's C API
//! on braid's simulator) to programs outside braid's cargo builds: braid's own downstream
//! programs (through `BRAID_ACL_LIB`) and CANN clients nobody here wrote, such as torch_npu,
//! which find CANN's libraries by file name (through `LD_LIBRARY_PATH`).
//!
//! Cargo builds the library beside this binary (`target/<profile>/deps/`). The command copies
//! it once into the directory (so the directory outlives the build that made it), checks that
//! the copy loads as braid-acl-sim, makes each of CANN's library names a relative symbolic
//! link to it, and prints the environment to set. An install is all or nothing: the copy and
//! the links are made under temporary names and checked before they are renamed over the
//! names programs load, so a failed install (a `--lib` that is not braid-acl-sim, say) leaves
//! a working install in the directory as it was. Links rather than copies matter: the
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
    /// naming it. A failed install changes nothing in DIR: the copy is checked under a
    /// temporary name before it replaces the installed library.
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
    /// The library does not load as braid-acl-sim: nothing was installed.
    #[error("{} does not load as braid-acl-sim, so nothing was installed: {reason}", .lib.display())]
    Unusable {
        /// The library asked for.
        lib: PathBuf,
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
/// each of [`CANN_LIBRARY_NAMES`]. Returns the copy's absolute path.
///
/// All or nothing: the copy and the links are made under temporary names in `dir`, the copy
/// is handed to `check` (which [`check_loads`] is in the command), and only then renamed over
/// the names programs load, the library first. An install that fails (a file with a CANN name
/// in the way, a copy `check` refuses, a file system error) leaves `dir` as it was, its
/// library and links included, and removes `dir` if it made it.
pub fn lay_out(
    lib: &Path,
    dir: &Path,
    check: impl FnOnce(&Path) -> Result<(), InstallError>,
) -> Result<PathBuf, InstallError> {
    let made = !dir.exists();
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let result = dir
        .canonicalize()
        .map_err(io(dir))
        .and_then(|dir| lay_out_in(lib, &dir, check));
    if result.is_err() && made {
        // Empty again: every staged file was removed.
        let _ = std::fs::remove_dir(dir);
    }
    result
}

/// [`lay_out`] in the existing directory `dir` (absolute).
fn lay_out_in(
    lib: &Path,
    dir: &Path,
    check: impl FnOnce(&Path) -> Result<(), InstallError>,
) -> Result<PathBuf, InstallError> {
    let mut previous_links = Vec::new();
    for name in CANN_LIBRARY_NAMES {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if !meta.file_type().is_symlink() => return Err(InstallError::InTheWay(path)),
            Ok(_) => previous_links.push(Some(std::fs::read_link(&path).map_err(io(&path))?)),
            Err(_) => previous_links.push(None),
        }
    }
    let mut staging = Staging::new(dir);
    let staged_lib = staging.add(SIM_LIB_NAME);
    std::fs::copy(lib, &staged_lib).map_err(io(&staged_lib))?;
    check(&staged_lib)?;
    let staged_links = CANN_LIBRARY_NAMES
        .iter()
        .map(|name| {
            let path = staging.add(name);
            std::os::unix::fs::symlink(SIM_LIB_NAME, &path).map_err(io(&path))?;
            Ok(path)
        })
        .collect::<Result<Vec<_>, InstallError>>()?;
    // Commit. The previous library stays reachable under a staged name until every rename
    // has succeeded, so a failure can put it back.
    let target = dir.join(SIM_LIB_NAME);
    let backup = staging.add(&format!("{SIM_LIB_NAME}.previous"));
    let had_library = std::fs::hard_link(&target, &backup).is_ok();
    std::fs::rename(&staged_lib, &target).map_err(io(&target))?;
    for (i, (name, staged)) in CANN_LIBRARY_NAMES.iter().zip(&staged_links).enumerate() {
        let path = dir.join(name);
        if let Err(source) = std::fs::rename(staged, &path) {
            restore(dir, &previous_links[..=i], had_library.then_some(&backup));
            return Err(InstallError::Io { path, source });
        }
    }
    Ok(target)
}

/// Puts back what a failed commit of [`lay_out_in`] replaced: the first links (each the link
/// it was, or none) and the library (from `backup`, or none).
fn restore(dir: &Path, previous_links: &[Option<PathBuf>], backup: Option<&PathBuf>) {
    for (name, previous) in CANN_LIBRARY_NAMES.iter().zip(previous_links) {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        if let Some(previous) = previous {
            let _ = std::os::unix::fs::symlink(previous, &path);
        }
    }
    let target = dir.join(SIM_LIB_NAME);
    match backup {
        Some(backup) => {
            let _ = std::fs::rename(backup, &target);
        }
        None => {
            let _ = std::fs::remove_file(&target);
        }
    }
}

/// Files an install makes under temporary names (hidden, with this process's id) in the
/// directory; whichever is still there when it drops is removed.
struct Staging {
    dir: PathBuf,
    paths: Vec<PathBuf>,
}

impl Staging {
    fn new(dir: &Path) -> Self {
        Staging {
            dir: dir.to_path_buf(),
            paths: Vec::new(),
        }
    }

    /// The temporary name for `name`.
    fn add(&mut self, name: &str) -> PathBuf {
        let path = (self.dir).join(format!(".braid-install-{}-{name}", std::process::id()));
        // A leftover of an earlier install killed half way, by a process of the same id.
        let _ = std::fs::remove_file(&path);
        self.paths.push(path.clone());
        path
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        for path in &self.paths {
            // Renamed into place, or never made: nothing to remove.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Checks that the library at `path` (a copy of `lib`) loads as braid-acl-sim (ACL's symbols
/// and braid's extension symbols).
pub fn check_loads(lib: &Path, path: &Path) -> Result<(), InstallError> {
    let unusable = |reason: String| InstallError::Unusable {
        lib: lib.to_path_buf(),
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
            let installed = lay_out(&lib, &args.dir, |copy| check_loads(&lib, copy))?;
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
        let installed = lay_out(&lib, &root.join("cann"), |_| Ok(())).unwrap();
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
        lay_out(&lib, dir, |_| Ok(())).unwrap();
        assert_eq!(std::fs::read(dir.join("libhccl.so")).unwrap(), b"second");
        assert_eq!(
            entries(dir).len(),
            1 + CANN_LIBRARY_NAMES.len(),
            "no staged file is left"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The names in `dir`, sorted.
    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_copy_the_check_refuses_changes_nothing() {
        let root = scratch("refused");
        let lib = root.join("libsim.so");
        std::fs::write(&lib, b"working").unwrap();
        let dir = root.join("cann");
        lay_out(&lib, &dir, |_| Ok(())).unwrap();
        // One link pointing elsewhere, one missing: both stay so.
        std::fs::remove_file(dir.join("libhccl.so")).unwrap();
        std::os::unix::fs::symlink("elsewhere.so", dir.join("libhccl.so")).unwrap();
        std::fs::remove_file(dir.join("libopapi.so")).unwrap();
        let before = entries(&dir);
        std::fs::write(&lib, b"broken").unwrap();
        let refuse = |copy: &Path| {
            assert_eq!(
                std::fs::read(copy).unwrap(),
                b"broken",
                "the check sees the copy"
            );
            Err(InstallError::Unusable {
                lib: lib.clone(),
                reason: "refused".to_string(),
            })
        };
        let err = lay_out(&lib, &dir, refuse).unwrap_err();
        assert!(matches!(err, InstallError::Unusable { .. }), "{err:?}");
        assert_eq!(entries(&dir), before);
        assert_eq!(std::fs::read(dir.join(SIM_LIB_NAME)).unwrap(), b"working");
        assert_eq!(
            std::fs::read(dir.join("libascendcl.so")).unwrap(),
            b"working"
        );
        assert_eq!(
            std::fs::read_link(dir.join("libhccl.so")).unwrap(),
            Path::new("elsewhere.so")
        );
        // A directory the failed install made is removed again.
        let fresh = root.join("fresh").join("cann");
        let refuse = |_: &Path| Err(InstallError::NoSuchLibrary(lib.clone()));
        lay_out(&lib, &fresh, refuse).unwrap_err();
        assert!(!fresh.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_commit_that_fails_half_way_is_put_back() {
        let root = scratch("restore");
        let dir = root.join("cann");
        std::fs::create_dir_all(&dir).unwrap();
        // Before: the old library, libascendcl.so linked elsewhere, libhccl.so missing.
        std::fs::write(dir.join("old-backup"), b"old").unwrap();
        std::os::unix::fs::symlink("elsewhere.so", dir.join("libascendcl.so")).unwrap();
        // Half way: the new library and both first links renamed into place.
        std::fs::write(dir.join(SIM_LIB_NAME), b"new").unwrap();
        std::fs::remove_file(dir.join("libascendcl.so")).unwrap();
        for name in &CANN_LIBRARY_NAMES[..2] {
            std::os::unix::fs::symlink(SIM_LIB_NAME, dir.join(name)).unwrap();
        }
        restore(
            &dir,
            &[Some(PathBuf::from("elsewhere.so")), None],
            Some(&dir.join("old-backup")),
        );
        assert_eq!(std::fs::read(dir.join(SIM_LIB_NAME)).unwrap(), b"old");
        assert_eq!(
            std::fs::read_link(dir.join("libascendcl.so")).unwrap(),
            Path::new("elsewhere.so")
        );
        assert_eq!(entries(&dir), ["libascendcl.so", SIM_LIB_NAME]);
        // Without a previous library, the new one goes.
        restore(&dir, &[], None);
        assert!(!dir.join(SIM_LIB_NAME).exists());
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
        let err = lay_out(&lib, &dir, |_| Ok(())).unwrap_err();
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
        let lib = root.join("asked-for.so");
        let copy = root.join(SIM_LIB_NAME);
        std::fs::write(&copy, b"not a library").unwrap();
        let err = check_loads(&lib, &copy).unwrap_err();
        assert!(matches!(err, InstallError::Unusable { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("{} does not load", lib.display())),
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
