"""Device initialisation: torch_npu finds braid-acl-sim's devices, its SoC name, and the
per-thread current device; settings it cannot use are clear errors at init."""

import os
import threading

import torch

import braid_npu
from braid_npu import child_result


def test_the_cann_torch_npu_loaded_is_braid_acl_sim():
    torch.ones(1, device="npu")
    assert braid_npu.loaded_cann_library().endswith("libbraid_acl_sim.so")


def test_npu_is_available_with_the_simulated_device_count():
    assert torch.npu.is_available()
    assert torch.npu.device_count() == int(os.environ.get("BRAID_ACL_SIM_DEVICES", "8"))


def test_the_device_name_is_the_configured_soc():
    assert torch.npu.get_device_name(0) == os.environ.get("BRAID_ACL_SIM_SOC", "Ascend910B4")


def test_the_current_device_is_per_thread():
    torch.npu.set_device(0)
    seen = {}

    def other():
        torch.npu.set_device(1)
        seen["other"] = torch.npu.current_device()
        seen["tensor"] = torch.ones(2, device="npu").device

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"other": 1, "tensor": torch.device("npu", 1)}
    assert torch.npu.current_device() == 0
    assert torch.ones(2, device="npu").device == torch.device("npu", 0)


def test_another_soc_of_the_family_is_reported_and_computes(run_child):
    proc = run_child(
        """
        import braid_npu, torch, torch_npu
        name = torch.npu.get_device_name(0)
        braid_npu.result([name, (torch.ones(3, device="npu") * 2).cpu().tolist()])
        """,
        env={"BRAID_ACL_SIM_SOC": "Ascend910_9391"},
    )
    assert child_result(proc) == ["Ascend910_9391", [2.0, 2.0, 2.0]]


def test_a_soc_name_torch_npu_cannot_use_is_a_clear_error_at_init(run_child):
    proc = run_child(
        """
        import torch, torch_npu
        torch.ones(1, device="npu")
        """,
        env={"BRAID_ACL_SIM_SOC": "Ascend310P3"},
    )
    assert proc.returncode != 0
    assert 'BRAID_ACL_SIM_SOC="Ascend310P3" is not valid: expected one of Ascend910B1' in proc.stderr


def test_a_device_count_torch_npu_cannot_use_is_a_clear_error_at_init(run_child):
    # torch_npu is built for at most 32 devices and says so when it sets up its streams.
    proc = run_child(
        """
        import torch, torch_npu
        torch.ones(1, device="npu")
        """,
        env={"BRAID_ACL_SIM_DEVICES": "40"},
    )
    assert proc.returncode != 0
    assert "larger than the compiled max number of npus expected (32)" in proc.stderr
