"""The torch_npu suite's set-up: unmodified torch_npu 2.14 on braid-acl-sim.

Run it with ``scripts/torch_npu_tests.sh``: it prepares the Python environment, builds and
installs braid-acl-sim's wheel, and runs pytest with the wheel's command, ``braid-acl-sim
run``, which sets the environment (see ``braid_npu``). Tests that need an environment of their
own (a SoC name, a device count, an allocator configuration, a race report) run a child
program with ``run_child``.

When a test fails, the calls braid-acl-sim refused during it (``BRAID_ACL_SIM_ERROR_LOG``)
are added to the report, so a failure names the ACL or aclnn call that differed from what
torch_npu expected.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import braid_npu  # noqa: E402


def _installed_dir():
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        lib = Path(d) / "libascendcl.so" if d else None
        if lib is not None and lib.exists():
            return Path(d), os.path.realpath(lib)
    return None, None


def _shim_loaded():
    with open("/proc/self/maps") as maps:
        return any("libbraid_keyset_shim.so" in line for line in maps)


_DIR, _LIB = _installed_dir()
if _DIR is None or not _LIB.endswith("libbraid_acl_sim.so") or not _shim_loaded():
    raise pytest.UsageError(
        "run the suite with braid-acl-sim's command, `braid-acl-sim run python -m pytest "
        "tests/torch_npu` (scripts/torch_npu_tests.sh builds and installs it and does): "
        f"libascendcl.so on LD_LIBRARY_PATH resolves to {_LIB!r}, and the keyset workaround "
        f"is {'' if _shim_loaded() else 'not '}loaded"
    )
if os.environ.get("BRAID_ACL_SIM_TIMING_ONLY", "none") != "none":
    raise pytest.UsageError(
        "BRAID_ACL_SIM_TIMING_ONLY must be unset or `none`: every device computes"
    )

# The runner (scripts/torch_npu_tests.sh) names the log, to show it should the process die;
# run directly, the suite keeps one of its own.
_ERROR_LOG = Path(
    os.environ.get(braid_npu.ERROR_LOG_ENV)
    or Path(tempfile.mkdtemp(prefix="braid-npu-")) / "acl-sim-errors.log"
)
os.environ[braid_npu.ERROR_LOG_ENV] = str(_ERROR_LOG)
# A collective some rank has not issued fails a synchronize after this long, and torch_npu's
# HCCL watchdog then takes the whole process down (SIGABRT). Ranks that are threads of one
# process issue from torch_npu's task-queue threads, which a loaded 2-core machine can starve
# for longer than braid-acl-sim's default 5 s: the suite waits a minute (a test that wants
# the timeout sets its own).
os.environ.setdefault(braid_npu.COLLECTIVE_TIMEOUT_ENV, "60000")

import torch  # noqa: E402
import torch_npu  # noqa: E402,F401

def _log_size():
    return _ERROR_LOG.stat().st_size if _ERROR_LOG.exists() else 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "setup":
        item._braid_log_start = _log_size()
    if report.failed and _ERROR_LOG.exists():
        start = getattr(item, "_braid_log_start", 0)
        with open(_ERROR_LOG) as f:
            f.seek(start)
            refused = f.read().strip()
        if refused:
            report.sections.append(("braid-acl-sim refused these calls", refused))


@pytest.fixture
def run_child(tmp_path):
    """Runs a Python program in a fresh process with the suite's environment plus ``env``
    (a value of None removes the variable); returns the finished process. The program runs on
    braid-acl-sim as the suite does, with ``braid_npu`` importable."""

    def run(source, env=None, timeout=300):
        script = tmp_path / "program.py"
        script.write_text("import braid_npu\n" + textwrap.dedent(source))
        child_env = braid_npu.child_env(
            {braid_npu.ERROR_LOG_ENV: str(tmp_path / "child-errors.log"), **(env or {})}
        )
        return subprocess.run(
            [sys.executable, str(script)],
            env=child_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp_path,
        )

    return run
