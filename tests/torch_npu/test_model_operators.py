"""The operators transformer models call, one family at a time, through unmodified torch_npu
on braid-acl-sim, against torch on the CPU: int64 positions and bool masks in arithmetic,
copies, fills and sums; embeddings, advanced indexing, index_select and index_copy; cat,
where, masked_fill, triu / tril, arange, cumsum; the activations and RMSNorm's pieces; softmax
through a float32 cast; LayerNorm with its [H] weights on one row and on several; the matrix
products as models pass them (a transposed weight, a bias, 4-D with broadcast batches, 1-D
operands); and what greedy decoding asks (argmax, max, any / all, comparisons with a scalar,
bitwise and / or / not, rsub)."""

import pytest
import torch

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
IDS = lambda d: str(d).split(".")[-1]  # noqa: E731

TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}


def same(npu_result, cpu_result):
    """``npu_result`` was computed on the NPU and equals ``cpu_result`` (exactly for integers
    and bools, within the type's tolerance for floats)."""
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype, (npu_result.dtype, cpu_result.dtype)
    got = npu_result.cpu()
    if cpu_result.is_floating_point():
        torch.testing.assert_close(got, cpu_result, **TOL[cpu_result.dtype])
    else:
        assert torch.equal(got, cpu_result), (got, cpu_result)


def test_int64_and_bool_arithmetic_copies_fills_and_sums():
    ids = torch.tensor([[3, 0, 7, 2, 9]])
    n = ids.npu()
    same(n + 4, ids + 4)
    same(n - 2, ids - 2)
    same(n * 3, ids * 3)
    same(n * n, ids * ids)
    same(1 - n, 1 - ids)
    m = n.clone()
    m.add_(5)
    same(m, ids + 5)
    mask = ids > 2
    nmask = n > 2
    same(nmask, mask)
    same(nmask.to(torch.int64), mask.to(torch.int64))
    same(n.to(torch.bool), ids.to(torch.bool))
    same(nmask.to(torch.float32), mask.to(torch.float32))
    same(nmask.sum(), mask.sum())
    same(nmask.sum(-1), mask.sum(-1))
    same(torch.ones(3, 4, dtype=torch.bool, device="npu"), torch.ones(3, 4, dtype=torch.bool))
    same(torch.ones(5, dtype=torch.int64, device="npu"), torch.ones(5, dtype=torch.int64))
    same(torch.full((2, 3), True, device="npu"), torch.full((2, 3), True))
    same(torch.full((4,), -7, device="npu"), torch.full((4,), -7))
    same(n.new_ones(2, 2), ids.new_ones(2, 2))


@pytest.mark.parametrize("dtype", FLOATS + (torch.int64,), ids=IDS)
def test_embeddings_indexing_and_index_copy(dtype):
    torch.manual_seed(0)
    weight = (torch.randn(10, 4) * 4).to(dtype)
    ids = torch.tensor([[3, 0, 9], [1, 1, 4]])
    same(torch.nn.functional.embedding(ids.npu(), weight.npu()), torch.nn.functional.embedding(ids, weight))
    x = (torch.randn(2, 6, 3) * 4).to(dtype)
    nx = x.npu()
    same(nx[:, [2, 0]], x[:, [2, 0]])
    same(nx[:, [-1, 0]], x[:, [-1, 0]])
    same(nx[[1, 0], :, [2]], x[[1, 0], :, [2]])
    same(nx.transpose(0, 2)[:, torch.tensor([5, 1]).npu()], x.transpose(0, 2)[:, torch.tensor([5, 1])])
    same(nx.index_select(1, torch.tensor([4, 4, 0]).npu()), x.index_select(1, torch.tensor([4, 4, 0])))
    cache = torch.zeros(1, 2, 8, 3, dtype=dtype)
    ncache = cache.npu()
    src = (torch.randn(1, 2, 2, 3) * 4).to(dtype)
    pos = torch.tensor([5, 2])
    ncache.index_copy_(2, pos.npu(), src.npu())
    cache.index_copy_(2, pos, src)
    same(ncache, cache)
    same(ncache.index_copy(2, pos.npu(), src.npu() * 2), cache.index_copy(2, pos, src * 2))


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_cat_where_masked_fill_triangles_arange_and_cumsum(dtype):
    torch.manual_seed(1)
    a, b = torch.randn(2, 3).to(dtype), torch.randn(4, 2).to(dtype)
    na, nb = a.npu(), b.npu()
    same(torch.cat([na, nb.t()], dim=1), torch.cat([a, b.t()], dim=1))
    same(torch.cat([na, na], dim=-2), torch.cat([a, a], dim=-2))
    same(torch.cat([torch.empty(0, device="npu", dtype=dtype), na.flatten()]), torch.cat([torch.empty(0, dtype=dtype), a.flatten()]))
    mask = torch.tensor([[True, False, True]])
    nmask = mask.npu()
    same(torch.where(nmask, na, torch.tensor(0.5, dtype=dtype).npu()), torch.where(mask, a, torch.tensor(0.5, dtype=dtype)))
    same(na.masked_fill(nmask, torch.finfo(dtype).min), a.masked_fill(mask, torch.finfo(dtype).min))
    same(na.masked_fill(~nmask, 0), a.masked_fill(~mask, 0))
    sq = torch.randn(2, 4, 4).to(dtype)
    nsq = sq.npu()
    same(torch.triu(nsq, 1), torch.triu(sq, 1))
    same(torch.tril(nsq, -1), torch.tril(sq, -1))
    t = nsq.clone()
    t.triu_()
    same(t, torch.triu(sq))
    same(torch.ones(6, 6, dtype=torch.bool, device="npu").tril(), torch.ones(6, 6, dtype=torch.bool).tril())
    same(torch.arange(3, 11, 2, device="npu"), torch.arange(3, 11, 2))
    same(torch.arange(0.5, 2.0, 0.25, device="npu", dtype=dtype), torch.arange(0.5, 2.0, 0.25, dtype=dtype))
    same(torch.cumsum(na, 1), torch.cumsum(a, 1))
    same(torch.cumsum(nmask.to(torch.int64), -1), torch.cumsum(mask.to(torch.int64), -1))


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_activations_rms_norm_pieces_and_softmax(dtype):
    torch.manual_seed(2)
    x = torch.randn(3, 8).to(dtype)
    n = x.npu()
    for f in (torch.cos, torch.sin, torch.neg, torch.tanh, torch.nn.functional.silu):
        same(f(n), f(x))
    same(n.pow(2), x.pow(2))
    same(n.pow(3), x.pow(3))
    same(n.pow(2).mean(-1, keepdim=True), x.pow(2).mean(-1, keepdim=True))
    same(torch.rsqrt(n.abs() + 1), torch.rsqrt(x.abs() + 1))
    same(torch.softmax(n, -1), torch.softmax(x, -1))
    same(torch.softmax(n, -1, dtype=torch.float32).to(dtype), torch.softmax(x, -1, dtype=torch.float32).to(dtype))
    # (torch_npu 2.14 sends gelu's tanh approximation to aclnnGelu, the exact one, unless its
    # "compatible implementation" setting is on: only the exact GELU is compared.)
    same(torch.nn.functional.gelu(n), torch.nn.functional.gelu(x))


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_layer_norm_on_one_row_and_on_several(dtype):
    torch.manual_seed(3)
    norm = torch.nn.LayerNorm(8).to(dtype)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    npu_norm = torch.nn.LayerNorm(8).to(dtype).npu()
    npu_norm.load_state_dict(norm.state_dict())
    with torch.no_grad():
        for shape in ((1, 1, 8), (2, 3, 8)):
            x = torch.randn(*shape).to(dtype)
            same(npu_norm(x.npu()), norm(x))
    # The module's weight keeps its [H] shape (torch_npu's compile path reshaped it in place).
    assert npu_norm.weight.shape == (8,) and npu_norm.bias.shape == (8,)


@pytest.mark.parametrize("dtype", FLOATS, ids=IDS)
def test_matrix_products_as_models_pass_them(dtype):
    torch.manual_seed(4)
    tol = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 5e-2}[dtype]

    def close(got, want):
        assert got.device.type == "npu"
        torch.testing.assert_close(got.cpu().float(), want.float(), rtol=tol, atol=tol)

    x = torch.randn(2, 3, 16).to(dtype)
    linear = torch.nn.Linear(16, 8, bias=False).to(dtype)
    biased = torch.nn.Linear(16, 8).to(dtype)
    with torch.no_grad():
        close(torch.nn.functional.linear(x.npu(), linear.weight.npu()), linear(x))
        close(torch.nn.functional.linear(x.npu(), biased.weight.npu(), biased.bias.npu()), biased(x))
        q, k = torch.randn(1, 4, 5, 8).to(dtype), torch.randn(1, 1, 8, 5).to(dtype)
        close(q.npu() @ k.npu(), q @ k)
        close(q.npu() @ q.npu().transpose(2, 3), q @ q.transpose(2, 3))
        close(torch.bmm(q[0].npu(), k[0].expand(4, 8, 5).npu()), torch.bmm(q[0], k[0].expand(4, 8, 5)))
        v, m = torch.randn(8).to(dtype), torch.randn(8, 3).to(dtype)
        close(v.npu() @ m.npu(), v @ m)
        close(m.t().npu() @ v.npu(), m.t() @ v)
        close(v.npu() @ v.npu(), v @ v)


def test_what_greedy_decoding_asks():
    torch.manual_seed(5)
    logits = torch.randn(2, 7)
    n = logits.npu()
    same(n.argmax(-1), logits.argmax(-1))
    same(n.argmax(-1, keepdim=True), logits.argmax(-1, keepdim=True))
    same(n.max(), logits.max())
    values, positions = n.max(-1)
    want_values, want_positions = logits.max(-1)
    same(values, want_values)
    same(positions, want_positions)
    done = torch.tensor([True, False])
    nd = done.npu()
    same(nd.all(), done.all())
    same(nd.any(), done.any())
    ids = torch.tensor([[4, 0, 2]])
    ni = ids.npu()
    same(ni == 0, ids == 0)
    same(ni < 3, ids < 3)
    same(ni <= ni[:, [2, 1, 0]], ids <= ids[:, [2, 1, 0]])
    same(nd & (ni[0, :2] > 0), done & (ids[0, :2] > 0))
    same(nd | True, done | True)
    same(~nd, ~done)
    same(nd & True, done & True)
    same(1 - nd.to(torch.int64), 1 - done.to(torch.int64))
