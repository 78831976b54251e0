"""The wheel's command, `braid-acl-sim run [options] PROGRAM...`, from a fresh shell: it alone
makes a Python program (and the processes it starts) run torch_npu on braid-acl-sim, its
options set braid-acl-sim's variables, and bad input is refused naming it. (The race report
and timeline it asks for are checked in test_sanitizer.py.)"""

import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import braid_npu
from braid_npu import assert_child_ok, run_command

from braid_acl_sim import LIBRARY
from braid_acl_sim.layout import CANN_LIBRARY_NAMES, LayoutError, cann_dir

REPO = braid_npu.HERE.parents[1]

DEVICES = """
import json, subprocess, sys, torch, torch_npu
child = subprocess.run(
    [sys.executable, "-c", "import torch, torch_npu; print(torch.npu.device_count())"],
    capture_output=True, text=True, check=True,
)
print(json.dumps([torch.ones(3, device="npu").sum().item(), torch.npu.device_count(),
                  int(child.stdout.split()[-1])]))
"""


def last_json(proc):
    assert_child_ok(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_program_and_the_processes_it_starts_run_on_braid_acl_sim(tmp_path):
    (tmp_path / "devices.py").write_text(DEVICES)
    proc = run_command(["run", "python", "devices.py"], cwd=tmp_path)
    assert last_json(proc) == [3.0, 8, 8]


def test_devices_sets_the_device_count(tmp_path):
    (tmp_path / "devices.py").write_text(DEVICES)
    proc = run_command(["run", "--devices", "4", "python", "devices.py"], cwd=tmp_path)
    assert last_json(proc) == [3.0, 4, 4]


@pytest.mark.parametrize("value", ["0", "33", "two"])
def test_a_device_count_torch_npu_cannot_use_is_refused_naming_the_option(tmp_path, value):
    proc = run_command(["run", "--devices", value, "python", "-c", "pass"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"--devices: '{value}': torch_npu handles 1 to 32 devices" in proc.stderr


def test_without_a_program_the_command_says_what_to_give(tmp_path):
    proc = run_command(["run"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "name the program to run, e.g. `braid-acl-sim run python prog.py`" in proc.stderr


def test_a_program_that_is_not_found_is_named_with_the_shell_s_status(tmp_path):
    proc = run_command(["run", "no-such-program-braid"], cwd=tmp_path)
    assert proc.returncode == 127
    assert "braid-acl-sim run: no-such-program-braid: command not found" in proc.stderr


def test_the_program_s_exit_status_and_arguments_are_its_own(tmp_path):
    proc = run_command(
        ["run", "python", "-c", "import sys; print(sys.argv[1:]); sys.exit(7)", "--timeline", "x"],
        cwd=tmp_path,
    )
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.strip() == "['--timeline', 'x']"
    assert not (tmp_path / "x").exists()


def test_report_paths_are_where_the_command_ran_even_if_the_program_changes_directory(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    program = """
import os, torch, torch_npu
os.chdir("elsewhere")
torch.ones(4, device="npu").cpu()
"""
    (tmp_path / "program.py").write_text(program)
    proc = run_command(
        ["run", "--race-report", "races.json", "--timeline", "timeline.json", "python",
         "program.py"],
        cwd=tmp_path,
    )
    assert_child_ok(proc)
    assert json.loads((tmp_path / "races.json").read_text())["count"] == 0
    assert json.loads((tmp_path / "timeline.json").read_text())["traceEvents"]
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_error_log_collects_the_calls_braid_acl_sim_refused(tmp_path):
    program = """
import torch, torch_npu
y = torch.ones(4, dtype=torch.complex64).npu()
try:
    torch.cumsum(y, 0).cpu()
except RuntimeError:
    print("refused")
"""
    (tmp_path / "program.py").write_text(program)
    proc = run_command(
        ["run", "--error-log", "refused.log", "python", "program.py"],
        cwd=tmp_path,
        env={"ASCEND_LAUNCH_BLOCKING": "1"},
    )
    assert_child_ok(proc)
    assert "refused" in proc.stdout
    log = (tmp_path / "refused.log").read_text()
    # Binary (aclnn) operators first, as on an Atlas A2: the complex cumsum's aclnn call.
    assert "161002 aclnnCumsumGetWorkspaceSize: self has data type 16" in log, log


def test_a_sitecustomize_of_the_user_s_still_runs(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITECUSTOMIZE = True\n")
    program = (
        "import builtins, torch, torch_npu; "
        "print(getattr(builtins, 'USER_SITECUSTOMIZE', False), torch.ones(2, device='npu').sum().item())"
    )
    proc = run_command(
        ["run", "python", "-c", program], cwd=tmp_path, env={"PYTHONPATH": str(own)}
    )
    assert_child_ok(proc)
    assert proc.stdout.strip().splitlines()[-1] == "True 2.0", proc.stdout


def test_the_version_is_the_crate_s():
    with open(REPO / "Cargo.toml", "rb") as f:
        version = tomllib.load(f)["workspace"]["package"]["version"]
    proc = subprocess.run(
        [str(braid_npu.COMMAND), "--version"], capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == f"braid-acl-sim {version}"


def test_runs_starting_at_once_share_one_directory_of_cann_names(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    code = "from braid_acl_sim.layout import cann_dir; print(cann_dir())"

    def start(_):
        return subprocess.run(
            [sys.executable, "-c", code], env=braid_npu.fresh_env(env), capture_output=True,
            text=True, check=True,
        ).stdout.strip()

    with ThreadPoolExecutor(8) as pool:
        dirs = set(pool.map(start, range(8)))
    assert len(dirs) == 1, dirs
    (made,) = dirs
    assert [p.name for p in (tmp_path / "braid-acl-sim").iterdir()] == [Path(made).name]
    for name in CANN_LIBRARY_NAMES:
        assert (Path(made) / name).resolve() == LIBRARY.resolve()


def test_a_directory_in_the_way_is_reported_never_replaced(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    made = cann_dir(env=env)
    (made / "libhccl.so").unlink()
    (made / "libhccl.so").symlink_to("/nonexistent/libhccl.so")
    with pytest.raises(LayoutError, match="does not link CANN's names"):
        cann_dir(env=env)
    proc = run_command(["run", "python", "-c", "pass"], cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert f"braid-acl-sim: {made} exists and does not link CANN's names" in proc.stderr
    assert (made / "libhccl.so").readlink() == Path("/nonexistent/libhccl.so")
    assert [p.name for p in (tmp_path / "braid-acl-sim").iterdir()] == [made.name]


def test_a_reinstall_reuses_its_directory_and_a_removed_installation_s_is_removed(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    installed = tmp_path / "site" / "libbraid_acl_sim.so"
    installed.parent.mkdir()
    installed.write_bytes(LIBRARY.read_bytes())
    first = cann_dir(library=installed, env=env)
    installed.write_bytes(LIBRARY.read_bytes() + b"\0")  # a reinstall: another file, one path
    assert cann_dir(library=installed, env=env) == first
    kept = cann_dir(env=env)  # the suite's installation: another path, another directory
    assert kept != first
    installed.unlink()  # uninstalled
    other = tmp_path / "other" / "libbraid_acl_sim.so"
    other.parent.mkdir()
    other.write_bytes(b"another installation")
    made = cann_dir(library=other, env=env)
    assert sorted(p.name for p in (tmp_path / "cache" / "braid-acl-sim").iterdir()) == sorted(
        [kept.name, made.name]
    )
