"""Tensors cross between the host and the simulated device unchanged (the blocking
aclrtMemcpy both ways), in every data type and layout."""

import pytest
import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@pytest.mark.parametrize("dtype", DTYPES + (torch.int64, torch.int32, torch.bool, torch.uint8))
def test_a_tensor_round_trips_through_the_device(dtype):
    torch.manual_seed(0)
    cpu = (torch.randn(3, 5, 7) * 100).to(dtype)
    npu = cpu.npu()
    assert npu.device.type == "npu" and npu.dtype == dtype and npu.shape == cpu.shape
    assert torch.equal(npu.cpu(), cpu)


def test_a_large_tensor_round_trips():
    cpu = torch.arange(3 << 20, dtype=torch.float32)
    assert torch.equal(cpu.npu().cpu(), cpu)


def test_a_strided_view_reads_back_as_its_elements():
    cpu = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    npu = cpu.npu()
    assert torch.equal(npu[:, 1:5:2].cpu(), cpu[:, 1:5:2])
    assert torch.equal(npu.t().contiguous().cpu(), cpu.t().contiguous())


def test_fill_and_zero_in_place():
    x = torch.empty(10, device="npu")
    x.fill_(2.5)
    assert torch.equal(x.cpu(), torch.full((10,), 2.5))
    x.zero_()
    assert torch.equal(x.cpu(), torch.zeros(10))
