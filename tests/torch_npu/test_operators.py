"""torch's basic operators run as braid-acl-sim's aclnn operators (aclnnInplaceOne,
aclnnInplaceZero, aclnnInplaceFillScalar, aclnnAdd, aclnnAdds, aclnnInplaceAdd(s), aclnnSub
and its family, aclnnMul, aclnnMuls, aclnnInplaceMul(s), aclnnInplaceCopy, aclnnReduceSum,
aclnnMm) and give torch-on-the-CPU's numbers in
float32, float16 and bfloat16; an operator braid-acl-sim does not compute is refused, naming
it, never answered with a wrong number."""

import pytest
import torch

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def inputs(dtype, *shapes, seed=0):
    torch.manual_seed(seed)
    return [torch.randn(*s).to(dtype) for s in shapes]


# float16 and bfloat16 results may differ from the CPU's by a unit in the last place of the
# operands: torch on the CPU itself computes `a + alpha * b` with one rounding or two depending
# on its kernel path (contiguous or broadcast), braid-acl-sim with one.
TOLERANCE = {
    torch.float32: {},
    torch.float16: {"rtol": 2e-3, "atol": 4e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 3e-2},
}


def same(npu_result, cpu_result):
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype
    torch.testing.assert_close(npu_result.cpu(), cpu_result, **TOLERANCE[cpu_result.dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_ones_zeros_and_full(dtype):
    same(torch.ones(4, 5, device="npu", dtype=dtype), torch.ones(4, 5, dtype=dtype))
    same(torch.zeros(7, device="npu", dtype=dtype), torch.zeros(7, dtype=dtype))
    same(torch.full((3, 3), 1.75, device="npu", dtype=dtype), torch.full((3, 3), 1.75, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_with_a_tensor_a_scalar_any_alpha_and_broadcasting(dtype):
    a, b, row = inputs(dtype, (8, 16), (8, 16), (16,))
    na, nb, nrow = a.npu(), b.npu(), row.npu()
    same(na + nb, a + b)
    same(na + 1, a + 1)
    same(na + 0.25, a + 0.25)
    same(torch.add(na, nb, alpha=2.5), torch.add(a, b, alpha=2.5))
    same(torch.add(na, 3.0, alpha=-2), torch.add(a, 3.0, alpha=-2))
    same(na + nrow, a + row)
    same(na - nb, a - b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mul_with_a_tensor_a_scalar_and_broadcasting(dtype):
    a, b, col = inputs(dtype, (8, 16), (8, 16), (8, 1), seed=1)
    na, nb, ncol = a.npu(), b.npu(), col.npu()
    same(na * nb, a * b)
    same(na * 3, a * 3)
    same(na * -0.5, a * -0.5)
    same(na * ncol, a * col)


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_add_and_mul(dtype):
    a, b = inputs(dtype, (32,), (32,), seed=2)
    na, nb = a.npu(), b.npu()
    na.add_(nb, alpha=2)
    a.add_(b, alpha=2)
    same(na, a)
    na.mul_(nb)
    a.mul_(b)
    same(na, a)
    na.mul_(0.5)
    a.mul_(0.5)
    same(na, a)
    na.add_(1)
    a.add_(1)
    same(na, a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_over_all_and_over_some_dimensions(dtype):
    (a,) = inputs(dtype, (4, 6, 5), seed=3)
    na = a.npu()
    same(na.sum(), a.sum())
    same(na.sum(0), a.sum(0))
    same(na.sum(dim=(0, 2)), a.sum(dim=(0, 2)))
    same(na.sum(-1, keepdim=True), a.sum(-1, keepdim=True))


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_clone_and_strided_operands(dtype):
    (a,) = inputs(dtype, (6, 4), seed=4)
    na = a.npu()
    out = torch.empty(6, 4, device="npu", dtype=dtype)
    out.copy_(na)
    same(out, a)
    same(na.clone(), a)
    # A transposed (non-contiguous) operand and a strided slice.
    same(na.t() + 1, a.t() + 1)
    same(na[:, ::2] * 2, a[:, ::2] * 2)
    same(na.t().contiguous(), a.t().contiguous())


@pytest.mark.parametrize("dtype", DTYPES)
def test_sub_with_a_tensor_a_scalar_and_alpha(dtype):
    a, b = inputs(dtype, (8, 16), (16,), seed=6)
    na, nb = a.npu(), b.npu()
    same(na - nb, a - b)
    same(na - 2, a - 2)
    same(torch.sub(na, nb, alpha=3), torch.sub(a, b, alpha=3))
    na.sub_(nb)
    a.sub_(b)
    same(na, a)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_conversions_between_float_types(src, dst):
    (a,) = inputs(src, (5, 7), seed=7)
    same(a.npu().to(dst), a.to(dst))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul(dtype):
    a, b = inputs(dtype, (16, 32), (32, 8), seed=5)
    # Low-precision types accumulate differently on every device: compare in float32
    # within the type's tolerance.
    got = (a.npu() @ b.npu()).cpu().float()
    want = a.float() @ b.float()
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


# A refused operator is an error torch_npu does not recover from (it stops its task queue), so
# the refusals run in programs of their own.


def test_an_operator_braid_acl_sim_does_not_compute_is_refused_naming_it(run_child, tmp_path):
    # braid-acl-sim exports no `aclnnCumprod`, so torch_npu launches `cumprod` through
    # aclopCompileAndExecute (operator `Cumprod`) on its task-queue thread, where torch_npu
    # may lose the error; the refusal fails the device, so the read-back reports it (never
    # the untouched buffer).
    proc = run_child(
        """
        import torch, torch_npu
        x = torch.ones(4, device="npu")
        torch.cumprod(x, 0).cpu()
        """
    )
    refusal = "aclopCompileAndExecute: operator Cumprod is not computed by braid-acl-sim"
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert refusal in proc.stderr
    assert refusal in (tmp_path / "child-errors.log").read_text()


def test_a_data_type_braid_acl_sim_does_not_compute_is_refused_naming_the_call(run_child):
    # complex64 (aclDataType 16) is a type braid-acl-sim computes in no operator.
    proc = run_child(
        """
        import torch, torch_npu
        y = torch.ones(4, dtype=torch.complex64).npu()
        (y + y).cpu()
        """
    )
    assert proc.returncode != 0
    assert "aclnnAddGetWorkspaceSize: self has data type 16, which braid-acl-sim does not compute" in proc.stderr


def test_integer_and_double_types_in_fills_copies_and_sub():
    assert torch.zeros(4, dtype=torch.int8, device="npu").cpu().tolist() == [0] * 4
    assert torch.full((3,), 200, dtype=torch.uint8, device="npu").cpu().tolist() == [200] * 3
    assert torch.tensor([1, -2, 3], dtype=torch.int32).npu().cpu().tolist() == [1, -2, 3]
    doubles = torch.tensor([0.1, 1e300], dtype=torch.float64)
    assert torch.equal(doubles.npu().cpu(), doubles)
    assert torch.tensor([1.7, -2.5]).npu().to(torch.int64).cpu().tolist() == [1, -2]
    a, b = torch.tensor([5, 1], dtype=torch.uint8), torch.tensor([3, 2], dtype=torch.uint8)
    assert (a.npu() - b.npu()).cpu().tolist() == [2, 255]  # wraps, as on the CPU
