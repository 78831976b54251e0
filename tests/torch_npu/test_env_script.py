"""scripts/torch_npu_env.sh, which prepares the environment every checkout of a machine shares:
runs at once wait for each other through its lock instead of building over one another, and it
never removes a directory that is not a virtual environment. (Preparing one for real, minutes
and gigabytes, is what scripts/torch_npu_tests.sh does before this suite.)"""

import os
import shutil
import subprocess
import time

import braid_npu

SCRIPT = braid_npu.HERE.parents[1] / "scripts" / "torch_npu_env.sh"
#: The environment the suite runs in (scripts/torch_npu_tests.sh names it).
SHARED = os.environ["BRAID_TORCH_NPU_VENV"]


def env_script(venv, *args):
    return subprocess.run(
        [str(SCRIPT), *args],
        env=dict(os.environ, BRAID_TORCH_NPU_VENV=str(venv)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def hold_lock(venv, mode, seconds):
    """Holds ``venv``'s lock (``-s`` shared or ``-x`` exclusive) in another process for a while;
    returns once it is held."""
    held = venv.parent / f"{venv.name}.held"
    holder = subprocess.Popen(
        ["flock", mode, f"{venv}.lock", "sh", "-c", f"touch {held}; sleep {seconds}"]
    )
    while not held.exists():
        time.sleep(0.05)
    return holder


def prepared_copy(tmp_path):
    """A directory with the shared environment's stamp: prepared, as far as the script sees."""
    venv = tmp_path / "venv"
    venv.mkdir()
    shutil.copy(os.path.join(SHARED, ".braid-requirements"), venv)
    return venv


def test_the_suite_s_environment_is_prepared():
    proc = env_script(SHARED, "--check")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == SHARED


def test_a_prepared_environment_is_used_once_a_preparation_in_progress_ends(tmp_path):
    venv = prepared_copy(tmp_path)
    holder = hold_lock(venv, "-x", 2)
    started = time.monotonic()
    proc = env_script(venv)
    waited = time.monotonic() - started
    holder.wait()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(venv)
    assert waited >= 1.5, f"it did not wait for the lock ({waited:.1f} s)"


def test_reading_a_prepared_environment_does_not_wait_for_runs_that_use_it(tmp_path):
    venv = prepared_copy(tmp_path)
    holder = hold_lock(venv, "-s", 30)
    try:
        started = time.monotonic()
        proc = env_script(venv)
        assert proc.returncode == 0, proc.stderr
        assert time.monotonic() - started < 15
    finally:
        holder.kill()
        holder.wait()


def test_a_preparation_waits_for_the_runs_that_use_it_and_never_removes_what_is_not_an_environment(tmp_path):
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "precious.txt").write_text("not an environment")
    holder = hold_lock(venv, "-s", 2)
    started = time.monotonic()
    proc = env_script(venv)
    waited = time.monotonic() - started
    holder.wait()
    assert proc.returncode == 1
    assert f"waiting for the other runs that use {venv} to finish" in proc.stderr
    assert waited >= 1.5, f"it did not wait for the run that uses it ({waited:.1f} s)"
    assert (
        f"{venv} exists and is not a virtual environment: it is never removed" in proc.stderr
    ), proc.stderr
    assert (venv / "precious.txt").read_text() == "not an environment"


def test_check_names_an_environment_that_is_not_prepared(tmp_path):
    proc = env_script(tmp_path / "nothing", "--check")
    assert proc.returncode == 1
    assert f"{tmp_path / 'nothing'} is not prepared" in proc.stderr
    assert not (tmp_path / "nothing").exists()
