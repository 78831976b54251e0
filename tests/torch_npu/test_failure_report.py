"""A failing test of the suite names the ACL or aclnn call braid-acl-sim refused during it
(the suite's report hook, conftest.py, reading BRAID_ACL_SIM_ERROR_LOG)."""

import subprocess
import sys

import braid_npu

FAILING_TEST = """
import torch


def test_a_complex_add():
    y = torch.ones(4, dtype=torch.complex64).npu()
    (y + y).cpu()
"""


def test_a_failure_names_the_call_braid_acl_sim_refused(tmp_path):
    (tmp_path / "test_failing.py").write_text(FAILING_TEST)
    env = braid_npu.child_env({braid_npu.ERROR_LOG_ENV: None})
    # The suite's conftest, loaded as a plugin, runs a session of one failing test.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
         "test_failing.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "braid-acl-sim refused these calls" in proc.stdout, proc.stdout
    assert "161002 aclnnAddGetWorkspaceSize: self has data type 16" in proc.stdout, proc.stdout
