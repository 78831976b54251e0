"""What the torch_npu suite and its child programs share.

The suite runs the unmodified torch_npu 2.14 wheel on braid-acl-sim, laid out as CANN's
libraries by ``braid acl-sim install`` (``scripts/torch_npu_tests.sh`` prepares everything and
runs pytest). Two things must happen before ``import torch``:

- the test-environment workaround ``keyset_shim.cpp`` is loaded (see its header: the
  registry's CUDA build of torch and torch_npu register the same allocator keys); it is
  compiled once with the system's C++ compiler into a cache directory;
- ``LD_LIBRARY_PATH`` names the install directory, which only the process's environment at
  start can do: the runner sets it.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHIM_SOURCE = HERE / "keyset_shim.cpp"

#: The environment variables of braid-acl-sim.
RACE_REPORT_ENV = "BRAID_ACL_SIM_RACE_REPORT"
TIMELINE_ENV = "BRAID_ACL_SIM_TIMELINE"
ERROR_LOG_ENV = "BRAID_ACL_SIM_ERROR_LOG"
COLLECTIVE_TIMEOUT_ENV = "BRAID_ACL_SIM_COLLECTIVE_TIMEOUT_MS"


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(os.environ.get("BRAID_TORCH_NPU_SHIM_DIR", os.path.join(base, "braid")))


def shim_path() -> Path:
    """The compiled workaround, built when missing or older than its source."""
    out = _cache_dir() / "keyset_shim.so"
    if out.exists() and out.stat().st_mtime >= SHIM_SOURCE.stat().st_mtime:
        return out
    compiler = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if compiler is None:
        raise RuntimeError(
            "the torch_npu suite needs a C++ compiler (c++, g++ or clang++) to build "
            f"{SHIM_SOURCE.name}, its test-environment workaround"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    # Build under a private name, then rename: parallel children never see half a file.
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".so")
    os.close(fd)
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", tmp, str(SHIM_SOURCE), "-ldl"],
        check=True,
    )
    os.replace(tmp, out)
    return out


def load_shim() -> None:
    """Loads the workaround into the global symbol scope; call it before ``import torch``."""
    if "torch" in sys.modules:
        raise RuntimeError("load_shim() must run before torch is imported")
    ctypes.CDLL(str(shim_path()), mode=ctypes.RTLD_GLOBAL)


def loaded_cann_library() -> str:
    """The file this process mapped for libascendcl.so (after torch_npu loaded)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libbraid_acl_sim.so" in line or "libascendcl.so" in line:
                return line.split()[-1]
    return ""


def assert_child_ok(proc) -> None:
    """Asserts a child program (``run_child``) succeeded, showing its output when not."""
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


RESULT_PREFIX = "BRAID-RESULT "


def result(value) -> None:
    """Prints a child program's result (any JSON value) for the test that ran it."""
    print(RESULT_PREFIX + json.dumps(value), flush=True)


def child_result(proc):
    """The result a child program printed with ``result`` (it must have succeeded)."""
    assert_child_ok(proc)
    lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT_PREFIX)]
    assert len(lines) == 1, f"one result expected\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return json.loads(lines[0][len(RESULT_PREFIX):])
