"""Two simulated devices of one node: tensors on each and copies between them (peer access,
aclrtMemcpy across devices)."""

import torch


def test_tensors_on_two_devices_and_copies_between_them():
    a = torch.arange(16, dtype=torch.float32).to("npu:1") * 2
    assert a.device == torch.device("npu", 1)
    b = a.to("npu:0")
    assert b.device == torch.device("npu", 0)
    assert torch.equal(b.cpu(), torch.arange(16, dtype=torch.float32) * 2)
    c = (b + 1).to("npu:1")
    assert torch.equal(c.cpu(), torch.arange(16, dtype=torch.float32) * 2 + 1)


def test_each_device_keeps_its_own_memory_statistics():
    torch.npu.synchronize(0)
    torch.npu.synchronize(1)
    before = torch.npu.memory_allocated(1)
    x = torch.empty(1 << 20, device="npu:1")
    assert torch.npu.memory_allocated(1) >= before + (4 << 20)
    del x
    assert torch.npu.memory_allocated(1) == before
