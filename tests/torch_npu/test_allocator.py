"""torch_npu's caching allocator over braid-acl-sim's device memory: its statistics, emptying
the cache, the device's memory, and expandable segments (the virtual-memory API)."""

import torch

from braid_npu import child_result


def test_allocated_and_reserved_follow_tensors_and_empty_cache_returns_segments():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    base_alloc = torch.npu.memory_allocated()
    x = torch.empty(1 << 20, device="npu")  # 4 MiB
    assert torch.npu.memory_allocated() >= base_alloc + (4 << 20)
    reserved = torch.npu.memory_reserved()
    assert reserved >= torch.npu.memory_allocated()
    del x
    assert torch.npu.memory_allocated() == base_alloc
    assert torch.npu.memory_reserved() == reserved, "a freed block stays cached"
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() < reserved


def test_mem_get_info_is_the_simulated_devices_memory(run_child):
    capacity = 8 << 30
    proc = run_child(
        """
        import braid_npu, torch, torch_npu
        free, total = torch.npu.mem_get_info()
        x = torch.empty(64 << 20, dtype=torch.uint8, device="npu")
        free_after, _ = torch.npu.mem_get_info()
        braid_npu.result([total, free - free_after])
        """,
        env={"BRAID_ACL_SIM_CAPACITY": str(capacity)},
    )
    total, used = child_result(proc)
    assert total == capacity
    assert used >= 64 << 20


def test_a_block_is_reused_after_free():
    x = torch.empty(1 << 18, device="npu")
    ptr = x.data_ptr()
    del x
    y = torch.empty(1 << 18, device="npu")
    assert y.data_ptr() == ptr


def test_expandable_segments_map_memory_through_the_virtual_memory_api(run_child):
    proc = run_child(
        """
        import braid_npu, torch, torch_npu
        xs = [torch.ones(1 << 20, device="npu") for _ in range(12)]
        total = sum(float(x.sum().cpu()) for x in xs)
        reserved = torch.npu.memory_reserved()
        del xs
        torch.npu.empty_cache()
        braid_npu.result([total, reserved, torch.npu.memory_reserved()])
        """,
        env={"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True"},
    )
    total, reserved, after = child_result(proc)
    assert total == 12.0 * (1 << 20)
    assert reserved >= 12 * (4 << 20)
    assert after == 0
