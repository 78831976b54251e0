"""Random numbers on the device: torch_npu's generator passes a seed and an offset to the
aclnn random family (aclnnInplaceUniform, aclnnInplaceNormal, aclnnInplaceBernoulli,
aclnnInplaceRandom, aclnnMultinomial, aclnnRandperm, aclnnDropout*), braid-acl-sim draws
with Philox4x32-10: the distributions are checked statistically at fixed seeds, the same seed
gives the same numbers, and a captured graph draws fresh numbers at each replay, the numbers
eager work draws for the same offsets."""

import math

import torch


def ks(values, cdf):
    """The Kolmogorov–Smirnov statistic of ``values`` against ``cdf``."""
    v = sorted(values)
    n = len(v)
    return max(max(abs(cdf(x) - i / n), abs((i + 1) / n - cdf(x))) for i, x in enumerate(v))


KS_CRITICAL = 1.95  # / sqrt(n): the 0.1 % level


def test_uniform_and_normal_have_their_distributions():
    torch.manual_seed(1234)
    n = 20_000
    u = torch.empty(n, device="npu").uniform_(2, 5).cpu()
    assert 2 <= u.min().item() and u.max().item() < 5
    assert abs(u.mean().item() - 3.5) < 0.03
    assert abs(u.var().item() - 0.75) < 0.04
    assert ks(u.tolist(), lambda x: min(max((x - 2) / 3, 0), 1)) < KS_CRITICAL / math.sqrt(n)

    z = torch.randn(n, device="npu").cpu()
    assert abs(z.mean().item()) < 0.03 and abs(z.var().item() - 1) < 0.06
    normal_cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))
    assert ks(z.tolist(), normal_cdf) < KS_CRITICAL / math.sqrt(n)
    # The test tells a wrong distribution apart.
    assert ks(u.tolist(), normal_cdf) > KS_CRITICAL / math.sqrt(n)

    y = torch.empty(n, device="npu", dtype=torch.float16).normal_(3, 2).float().cpu()
    assert abs(y.mean().item() - 3) < 0.06 and abs(y.std().item() - 2) < 0.06


def test_the_same_seed_gives_the_same_numbers():
    torch.manual_seed(7)
    a = torch.rand(64, device="npu").cpu()
    b = torch.rand(64, device="npu").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.rand(64, device="npu").cpu(), a)
    assert not torch.equal(a, b)
    g = torch.Generator(device="npu").manual_seed(7)
    assert torch.equal(torch.rand(64, device="npu", generator=g).cpu(), a)


def test_bernoulli_integers_permutations_and_multinomial():
    torch.manual_seed(3)
    n = 20_000
    ones = torch.empty(n, device="npu").bernoulli_(0.3).cpu()
    assert set(ones.unique().tolist()) == {0.0, 1.0}
    assert abs(ones.mean().item() - 0.3) < 0.016
    p = torch.tensor([0.0, 1.0] * 4, device="npu")
    assert torch.equal(torch.bernoulli(p).cpu(), p.cpu())

    ints = torch.randint(-3, 7, (n,), device="npu", dtype=torch.int32).cpu()
    counts = torch.bincount((ints + 3).long(), minlength=10).tolist()
    assert min(ints.tolist()) == -3 and max(ints.tolist()) == 6
    chi = sum((c - n / 10) ** 2 / (n / 10) for c in counts)
    assert chi < 27.88, counts  # 9 degrees of freedom, 0.1 % level

    perm = torch.randperm(1000, device="npu").cpu()
    assert sorted(perm.tolist()) == list(range(1000)) and perm.tolist() != list(range(1000))

    w = torch.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 0.0, 0.0, 2.0]], device="npu")
    s = torch.multinomial(w, 4000, replacement=True).cpu()
    c = torch.bincount(s[0], minlength=4).tolist()
    assert c[1] == 0 and (s[1] == 3).all()
    chi = sum((got - 4000 * p) ** 2 / (4000 * p) for got, p in zip([c[0], c[2], c[3]], [1 / 8, 3 / 8, 1 / 2]))
    assert chi < 13.82, c  # 2 degrees of freedom, 0.1 % level
    picks = torch.multinomial(w[0], 3).cpu().tolist()
    assert sorted(picks) == [0, 2, 3]


def test_dropout_keeps_one_minus_p_and_scales():
    torch.manual_seed(11)
    x = torch.ones(8000, device="npu", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25)
    kept = (y.detach().cpu() != 0).float()
    assert abs(kept.mean().item() - 0.75) < 0.025
    scaled = torch.tensor(4.0 / 3.0).item()  # in float32
    assert set(y.detach().cpu().unique().tolist()) == {0.0, scaled}
    # The backward pass applies the same mask.
    y.sum().backward()
    assert torch.equal((x.grad.cpu() != 0).float(), kept)


def test_a_captured_graph_draws_fresh_numbers_at_each_replay_as_eager_would():
    x = torch.empty(256, device="npu")
    y = torch.empty(256, device="npu")
    torch.npu.synchronize()
    g = torch.npu.NPUGraph()
    torch.manual_seed(21)
    with torch.npu.graph(g):
        x.uniform_()
        y.normal_(1, 2)
    replays = []
    for _ in range(3):
        g.replay()
        torch.npu.synchronize()
        replays.append((x.cpu().clone(), y.cpu().clone()))
    torch.manual_seed(21)
    for rx, ry in replays:
        ex = torch.empty(256, device="npu").uniform_().cpu()
        ey = torch.empty(256, device="npu").normal_(1, 2).cpu()
        assert torch.equal(rx, ex) and torch.equal(ry, ey)
    assert not torch.equal(replays[0][0], replays[1][0])
    g.reset()
