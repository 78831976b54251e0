"""Start-up and host-memory calls torch_npu makes, and what a refused operator leaves: the
CANN version braid-acl-sim answers (so version-gated code and tests run), a memory fraction
configured at start-up (aclrtGetMemInfo before any aclrtSetDevice), pinned host
registration, and a refused operator making every later read-back fail loudly instead of
returning numbers nothing computed."""

import torch
import torch_npu
from torch_npu.npu.utils import _is_gte_cann_version

import braid_npu


def test_the_cann_version_is_the_one_the_simulated_api_matches():
    assert _is_gte_cann_version("8.1.RC1") and _is_gte_cann_version("8.5.0")
    assert not _is_gte_cann_version("9.0.0")


def test_a_memory_fraction_at_start_up(run_child):
    proc = run_child(
        """
        import torch, torch_npu
        x = torch.ones(1 << 10, device="npu")
        free, total = torch.npu.mem_get_info()
        braid_npu.result([(x + 1).sum().item(), total > 0])
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "per_process_memory_fraction:0.5"},
    )
    assert braid_npu.child_result(proc) == [2048.0, True]


def test_pinned_host_registration():
    rt = torch_npu.npu.npurt()
    buf = torch.empty(1 << 16, dtype=torch.uint8)
    assert rt.npuHostRegister(buf.data_ptr(), buf.numel(), 0) == 0
    assert rt.npuHostUnregister(buf.data_ptr()) == 0
    # Twice is refused: the registration is really kept.
    assert rt.npuHostUnregister(buf.data_ptr()) != 0


def test_after_a_refused_operator_every_read_back_fails_naming_it(run_child):
    # torch_npu launches from its task-queue thread and drops the work queued behind a
    # failed launch: without braid-acl-sim's rule, `a + 1` would read back as zeros.
    proc = run_child(
        """
        import torch, torch_npu
        a = torch.ones(10, device="npu")
        errors = []
        b = torch.cumprod(a, 0)     # no aclnn operator: CANN's old path, refused
        for step in range(2):
            try:
                print((a + 1).cpu())
            except RuntimeError as e:
                errors.append(str(e))
        braid_npu.result(errors)
        """
    )
    errors = braid_npu.child_result(proc)
    # Both reads fail naming the refusal. Which read reports what depends on when
    # torch_npu's task-queue thread meets the refusal: torch_npu reports it itself once (its
    # "inner error", at the first read or the second), and braid-acl-sim's failed device
    # answers the copies of the other read.
    assert len(errors) == 2, errors
    assert all("operator Cumprod is not computed" in e for e in errors), errors
    assert any("device 0 failed" in e for e in errors), errors


def test_device_memory_the_host_cannot_back_is_refused_naming_the_budget(run_child):
    # The simulated devices keep their data in host memory: past the host-memory budget an
    # allocation is refused as out of memory, before the machine runs out.
    proc = run_child(
        """
        import torch, torch_npu
        a = torch.ones(8 << 20, device="npu")            # 32 MiB of the 64 MiB budget
        try:
            torch.ones(16 << 20, device="npu")           # 64 MiB more
            refusal = None
        except RuntimeError as e:
            refusal = str(e)
        del a
        torch.npu.empty_cache()
        b = torch.ones(12 << 20, device="npu")           # fits once the first is freed
        braid_npu.result([refusal, b[:2].cpu().tolist()])
        """,
        # A device set explicitly larger than the budget: the budget is what refuses.
        env={"BRAID_ACL_SIM_HOST_MEMORY": str(64 << 20), "BRAID_ACL_SIM_CAPACITY": str(1 << 30)},
    )
    refusal, values = braid_npu.child_result(proc)
    assert refusal is not None
    assert "67108864-byte host-memory budget" in refusal, refusal
    assert "BRAID_ACL_SIM_HOST_MEMORY" in refusal, refusal
    assert values == [1.0, 1.0]


def test_a_device_of_default_size_reports_what_the_host_budget_can_back(run_child):
    # Unless BRAID_ACL_SIM_CAPACITY says otherwise, a computing device has at most the
    # host-memory budget, so a program sizing its work from torch.npu.mem_get_info fits.
    proc = run_child(
        """
        import torch, torch_npu
        free, total = torch.npu.mem_get_info()
        braid_npu.result([free <= total, total])
        """,
        env={"BRAID_ACL_SIM_HOST_MEMORY": str(256 << 20)},
    )
    fits, total = braid_npu.child_result(proc)
    assert fits and total == 256 << 20, (fits, total)
