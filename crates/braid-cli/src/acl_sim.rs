//! `braid acl-sim`: hands braid-acl-sim (`libbraid_acl_sim.so`, ACL's C API on braid's
//! simulator) to programs outside braid's cargo builds.
//!
//! Cargo builds the library beside this binary (`target/<profile>/deps/`); `install` copies it
//! to a directory of the user's choosing and prints the `BRAID_ACL_LIB=` line that points any
//! program loading ACL through braid (or torch_npu) at it.

use braid::acl::{sim_library_candidates, AclApi, SIM_LIB_NAME};
use clap::Subcommand;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `braid acl-sim` can do.
#[derive(Subcommand)]
pub enum AclSimCommand {
    /// Copies `libbraid_acl_sim.so` from beside this binary (where `cargo build -p braid-cli`
    /// puts it) into DIR, checks that the copy loads as braid-acl-sim, and prints the line
    /// that makes programs load it: `export BRAID_ACL_LIB=DIR/libbraid_acl_sim.so`.
    Install {
        /// The directory to copy the library into (created if missing).
        #[arg(long)]
        dir: PathBuf,
    },
}

/// Why the library could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// This binary has no `libbraid_acl_sim.so` beside it.
    #[error(
        "{SIM_LIB_NAME} is not beside this braid binary (looked at {}): run the braid that \
         cargo builds in braid's repository (`cargo build --release -p braid-cli`, then \
         `target/release/braid acl-sim install --dir DIR`); `cargo install` copies the binary \
         alone",
        .tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotBuilt {
        /// Where it was looked for.
        tried: Vec<PathBuf>,
    },
    /// Creating the directory or copying failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path written.
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

/// Runs a `braid acl-sim` command, writing its output to `out`.
pub fn run(
    command: &AclSimCommand,
    out: &mut impl Write,
) -> Result<bool, Box<dyn std::error::Error>> {
    match command {
        AclSimCommand::Install { dir } => {
            let exe_dir = std::env::current_exe()?
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let installed = install(&exe_dir, dir)?;
            writeln!(out, "installed {}", installed.display())?;
            writeln!(out, "export BRAID_ACL_LIB={}", installed.display())?;
            Ok(true)
        }
    }
}

/// Copies braid-acl-sim from beside an executable in `exe_dir` into `dir` and returns the
/// copy's absolute path, once it loads as braid-acl-sim.
pub fn install(exe_dir: &Path, dir: &Path) -> Result<PathBuf, InstallError> {
    let tried = sim_library_candidates(exe_dir);
    let source = tried
        .iter()
        .find(|p| p.is_file())
        .ok_or_else(|| InstallError::NotBuilt {
            tried: tried.clone(),
        })?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let dir = dir.canonicalize().map_err(io(dir))?;
    let target = dir.join(SIM_LIB_NAME);
    // Through a temporary name, so a program that has the old copy loaded keeps a whole file.
    let partial = dir.join(format!("{SIM_LIB_NAME}.partial"));
    std::fs::copy(source, &partial).map_err(io(&partial))?;
    std::fs::rename(&partial, &target).map_err(io(&target))?;
    let unusable = |reason: String| InstallError::Unusable {
        path: target.clone(),
        reason,
    };
    let api = AclApi::load_from(&target).map_err(|e| unusable(e.to_string()))?;
    if !api.is_braid_acl_sim() {
        return Err(unusable("it lacks braid's extension symbols".to_string()));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_library_beside_the_binary_the_error_says_how_to_build_it() {
        let nowhere =
            std::env::temp_dir().join(format!("braid-cli-nowhere-{}", std::process::id()));
        let err = install(&nowhere, &nowhere.join("out")).unwrap_err();
        assert!(matches!(err, InstallError::NotBuilt { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("cargo build --release -p braid-cli")
                && text.contains(
                    &nowhere
                        .join("deps")
                        .join(SIM_LIB_NAME)
                        .display()
                        .to_string()
                ),
            "{text}"
        );
        assert!(!nowhere.join("out").exists(), "nothing is created");
    }
}
