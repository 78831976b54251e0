"""Builds braid-acl-sim's wheel from a braid checkout.

Besides the Python package (src/braid_acl_sim), the wheel holds, in braid_acl_sim/lib:

- libbraid_acl_sim.so, the release build of crates/acl-sim (cargo builds it in the
  workspace's target directory, so a checkout that has built it already only links);
- libbraid_keyset_shim.so, csrc/keyset_shim.cpp compiled with the system's C++ compiler
  ($CXX, else c++, g++ or clang++): what lets the registry's CUDA build of torch load beside
  torch_npu.

The wheel is tagged py3-none-<platform>: the libraries do not use Python, the command works
with any Python 3. setuptools' own build directory and metadata go to the target directory
too, so a build leaves the source tree as it was. Only wheels are built: the Rust crates are
outside this directory, so an sdist could not build (and editable installs lack the libraries).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PACKAGE = "braid_acl_sim"
CRATE = "braid-acl-sim"
CDYLIB = "braid_acl_sim"


def fail(message: str):
    sys.exit(f"braid-acl-sim wheel: {message}")


def cargo(*args: str) -> subprocess.CompletedProcess:
    if not (ROOT / "Cargo.toml").is_file():
        fail(f"{ROOT / 'Cargo.toml'} is missing: the wheel is built from a braid checkout (no sdist)")
    if shutil.which("cargo") is None:
        fail("cargo is not on PATH: building the wheel needs a Rust toolchain (https://rustup.rs)")
    return subprocess.run(
        ["cargo", *args], cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True
    )


def metadata() -> dict:
    return json.loads(cargo("metadata", "--format-version", "1", "--no-deps").stdout)


def build_cdylib() -> Path:
    """Builds crates/acl-sim in release and returns the shared library cargo made."""
    out = cargo(
        "build", "--release", "-p", CRATE, "--lib", "--message-format=json-render-diagnostics"
    )
    for line in out.stdout.splitlines():
        message = json.loads(line)
        target = message.get("target", {})
        if (
            message.get("reason") == "compiler-artifact"
            and target.get("name") == CDYLIB
            and "cdylib" in target.get("kind", [])
        ):
            for name in message["filenames"]:
                if name.endswith(".so"):
                    return Path(name)
    fail(f"cargo built no lib{CDYLIB}.so")


def build_shim(out: Path) -> None:
    """Compiles the allocator-key workaround for the registry's CUDA build of torch."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["c++", "g++", "clang++"]
    compiler = next((c for c in candidates if shutil.which(c)), None)
    if compiler is None:
        fail(f"no C++ compiler found (tried {', '.join(candidates)}; set CXX)")
    source = HERE / "csrc" / "keyset_shim.cpp"
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(source), "-ldl"], check=True
    )


class BuildPy(build_py):
    """The package's Python files, then its two libraries beside them."""

    def run(self):
        super().run()
        lib = Path(self.build_lib) / PACKAGE / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(build_cdylib(), lib / f"lib{CDYLIB}.so")
        build_shim(lib / "libbraid_keyset_shim.so")


class BinaryDistribution(Distribution):
    """A distribution with platform files (the libraries), installed as such."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    """A platform wheel (it holds Linux libraries) for any Python 3 (none of them uses
    Python's ABI)."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


META = metadata()
scratch = Path(META["target_directory"]) / "python-build" / CRATE
scratch.mkdir(parents=True, exist_ok=True)
setup(
    # The crate's version: one number for the library and its wheel.
    version=next(p["version"] for p in META["packages"] if p["name"] == CRATE),
    distclass=BinaryDistribution,
    cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel},
    options={
        "build": {"build_base": str(scratch / "build")},
        "egg_info": {"egg_base": str(scratch)},
    },
)
