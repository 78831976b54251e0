"""What the torch_npu suite and its child programs share.

The suite runs the unmodified torch_npu 2.14 wheel on braid-acl-sim through braid-acl-sim's
Python package, as a user does: ``braid-acl-sim run python -m pytest tests/torch_npu``
(``scripts/torch_npu_tests.sh`` builds and installs the wheel and runs that). The command sets
the environment every process of the run inherits: ``LD_LIBRARY_PATH`` leads to CANN's library
names linked to braid-acl-sim, and ``PYTHONPATH`` to the ``sitecustomize`` that loads the
workaround for the registry's CUDA build of torch before anything imports it. A child program
started with the suite's environment (``child_env``) runs on braid-acl-sim too.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The wheel's command, installed beside the suite's Python.
COMMAND = Path(sys.executable).parent / "braid-acl-sim"

#: The environment variables of braid-acl-sim.
RACE_REPORT_ENV = "BRAID_ACL_SIM_RACE_REPORT"
TIMELINE_ENV = "BRAID_ACL_SIM_TIMELINE"
ERROR_LOG_ENV = "BRAID_ACL_SIM_ERROR_LOG"
COLLECTIVE_TIMEOUT_ENV = "BRAID_ACL_SIM_COLLECTIVE_TIMEOUT_MS"


def child_env(changes=None) -> dict:
    """The suite's environment for a child program, with this directory added to
    ``PYTHONPATH`` (after what ``braid-acl-sim run`` put there) so that it can ``import
    braid_npu``; ``changes`` set variables (None removes one)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [p for p in [env.get("PYTHONPATH")] if p] + [str(HERE)]
    )
    for key, value in (changes or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def fresh_env(changes=None) -> dict:
    """The environment of a fresh shell in the suite's virtual environment (activated: its
    ``bin`` leads ``PATH``): none of what ``braid-acl-sim run`` set for the suite, no
    braid-acl-sim variable, and ``braid_npu`` importable; ``changes`` as in ``child_env``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "BRAID_ACL_LIB")
        and not k.startswith("BRAID_ACL_SIM_")
    }
    env["PATH"] = os.pathsep.join([str(COMMAND.parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(HERE)
    for key, value in (changes or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_command(args, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    """Runs ``braid-acl-sim ARGS...`` from a fresh shell (``fresh_env(env)``) in ``cwd``."""
    return subprocess.run(
        [str(COMMAND), *args],
        cwd=cwd,
        env=fresh_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


def free_port() -> int:
    """A TCP port on the loopback nobody listens on now (for a rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
