"""Attention on braid-acl-sim: PyTorch's ``scaled_dot_product_attention`` on "npu" reaches
``torch_npu.npu_fusion_attention``, which has no path but ``aclnnFlashAttentionScore``.
Its results equal CPU torch's within each float type's tolerance, with masks, grouped-query
heads (``enable_gqa`` or repeated heads) and causal modes, in every layout
``npu_fusion_attention`` takes; the softmax statistics it returns are CANN's ``[B, N, S, 8]``;
and an NPUGraph capture of it replays the eager numbers."""

import ctypes

import pytest
import torch
import torch.nn.functional as F
import torch_npu

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Scores and softmax in float32 on both sides; the difference is the order of the sums and
# the rounding of the result to the type.
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float16: {"rtol": 2e-3, "atol": 2e-3},
    torch.bfloat16: {"rtol": 1.6e-2, "atol": 2e-2},
}


def same(npu_result, cpu_result):
    assert npu_result.device.type == "npu"
    assert npu_result.dtype == cpu_result.dtype
    torch.testing.assert_close(npu_result.cpu(), cpu_result, **TOLERANCE[cpu_result.dtype])


def qkv(dtype, b=2, n=4, n_kv=4, s_q=6, s_kv=6, d=16, seed=0):
    torch.manual_seed(seed)
    return (
        torch.randn(b, n, s_q, d).to(dtype),
        torch.randn(b, n_kv, s_kv, d).to(dtype),
        torch.randn(b, n_kv, s_kv, d).to(dtype),
    )


def npu(*tensors):
    return [t.npu() for t in tensors]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_without_a_mask_and_with_bool_masks(dtype):
    q, k, v = qkv(dtype)
    nq, nk, nv = npu(q, k, v)
    same(F.scaled_dot_product_attention(nq, nk, nv), F.scaled_dot_product_attention(q, k, v))
    same(
        F.scaled_dot_product_attention(nq, nk, nv, scale=0.2),
        F.scaled_dot_product_attention(q, k, v, scale=0.2),
    )
    # PyTorch's bool mask keeps where it is True: a [S, S] triangle, and a [B, 1, S, S]
    # pattern with every row keeping some key.
    tri = torch.ones(6, 6, dtype=torch.bool).tril()
    torch.manual_seed(1)
    pattern = torch.rand(2, 1, 6, 6) > 0.4
    pattern[..., 0] = True
    for mask in (tri, pattern):
        same(
            F.scaled_dot_product_attention(nq, nk, nv, attn_mask=mask.npu()),
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_with_grouped_query_heads(dtype):
    q, k, v = qkv(dtype, n=8, n_kv=2, s_q=3, s_kv=7, seed=2)
    nq, nk, nv = npu(q, k, v)
    # The grouped heads passed as they are...
    same(
        F.scaled_dot_product_attention(nq, nk, nv, enable_gqa=True),
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
    )
    # ...and repeated, as transformers' `repeat_kv` does (expand, then a copy).
    rk, rv = (repeat_kv(t, 4) for t in (nk, nv))
    same(
        F.scaled_dot_product_attention(nq, rk, rv),
        F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)),
    )


def repeat_kv(t, times):
    b, n, s, d = t.shape
    return t[:, :, None].expand(b, n, times, s, d).reshape(b, n * times, s, d)


def _opapi_exports(symbol):
    """Whether braid-acl-sim (the aclnn library torch_npu loads) exports ``symbol``."""
    return hasattr(ctypes.CDLL("libopapi.so"), symbol)


@pytest.mark.skipif(
    not _opapi_exports("aclnnTriuGetWorkspaceSize"),
    reason="torch_npu builds SDPA's causal mask with aclnnTriu, which this braid-acl-sim lacks",
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_is_causal(dtype):
    q, k, v = qkv(dtype, seed=3)
    same(
        F.scaled_dot_product_attention(*npu(q, k, v), is_causal=True),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
    )


def _to_layout(t, layout):
    """A [B, N, S, D] tensor in ``layout``."""
    b, n, s, d = t.shape
    if layout == "BNSD":
        return t
    if layout == "BSND":
        return t.transpose(1, 2).contiguous()
    if layout == "BSH":
        return t.transpose(1, 2).reshape(b, s, n * d)
    return t.permute(2, 0, 1, 3).reshape(s, b, n * d)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
@pytest.mark.parametrize("mode", [2, 3])
def test_npu_fusion_attention_layouts_causal_modes_and_statistics(layout, mode):
    # 3 queries over 5 keys: the two causal modes differ (top left: row i sees keys 0..=i;
    # bottom right: keys 0..=i + 2).
    q, k, v = qkv(torch.float32, n=4, n_kv=2, s_q=3, s_kv=5, seed=4)
    triangle = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
    out, smax, ssum, *_ = torch_npu.npu_fusion_attention(
        *npu(*(_to_layout(t, layout) for t in (q, k, v))),
        4,
        layout,
        atten_mask=triangle.npu(),
        scale=0.25,
        sparse_mode=mode,
    )
    keep = torch.ones(3, 5, dtype=torch.bool).tril(diagonal=0 if mode == 2 else 2)
    rk, rv = (repeat_kv(t, 2) for t in (k, v))
    want = F.scaled_dot_product_attention(q, rk, rv, attn_mask=keep, scale=0.25)
    same(out, _to_layout(want, layout))
    scores = (q @ rk.transpose(-1, -2) * 0.25).masked_fill(~keep, float("-inf"))
    row_max = scores.amax(-1, keepdim=True)
    row_sum = (scores - row_max).exp().sum(-1, keepdim=True)
    assert smax.shape == ssum.shape == (2, 4, 3, 8)
    same(smax, row_max.expand(2, 4, 3, 8))
    same(ssum, row_sum.expand(2, 4, 3, 8))


def _warm_up(fn):
    s = torch.npu.Stream()
    s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s):
        fn()
    torch.npu.current_stream().wait_stream(s)
    torch.npu.synchronize()


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_captured_in_an_npugraph_replays_the_eager_numbers(dtype):
    q, k, v = qkv(dtype, n=4, n_kv=2, seed=5)
    static = npu(q, k, v)
    mask = torch.ones(6, 6, dtype=torch.bool).tril().npu()

    def step():
        return F.scaled_dot_product_attention(*static, attn_mask=mask, enable_gqa=True)

    _warm_up(step)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        captured = step()
    for seed in (6, 7):
        for dst, src in zip(static, qkv(dtype, n=4, n_kv=2, seed=seed)):
            dst.copy_(src.npu())
        g.replay()
        eager = step()
        torch.npu.synchronize()
        assert torch.equal(captured.cpu(), eager.cpu())
        same(captured, F.scaled_dot_product_attention(
            *(t.cpu() for t in static), attn_mask=mask.cpu(), enable_gqa=True))
    g.reset()
