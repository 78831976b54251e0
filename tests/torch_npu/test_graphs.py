"""NPUGraph on braid-acl-sim's capture (aclmdlRICaptureBegin/End, aclmdlRIExecuteAsync):
capture, replay with new inputs, two graphs sharing a memory pool, reset."""

import torch


def warm_up(fn):
    s = torch.npu.Stream()
    s.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(s):
        fn()
    torch.npu.current_stream().wait_stream(s)
    torch.npu.synchronize()


def test_a_captured_graph_replays_with_new_inputs():
    static_in = torch.zeros(64, device="npu")

    def step():
        return static_in * 2 + 1

    warm_up(step)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_out = step()
    for v in (1.0, 2.0, -3.0):
        static_in.copy_(torch.full((64,), v).npu())
        g.replay()
        torch.npu.synchronize()
        assert torch.equal(static_out.cpu(), torch.full((64,), 2 * v + 1))
    g.reset()


def test_two_graphs_share_a_memory_pool():
    x = torch.ones(128, device="npu")
    warm_up(lambda: x * 3)
    g1 = torch.npu.NPUGraph()
    with torch.npu.graph(g1):
        y = x * 3
    g2 = torch.npu.NPUGraph()
    with torch.npu.graph(g2, pool=g1.pool()):
        z = y + 1
    g1.replay()
    g2.replay()
    torch.npu.synchronize()
    assert torch.equal(z.cpu(), torch.full((128,), 4.0))
    x.copy_(torch.full((128,), 2.0).npu())
    g1.replay()
    g2.replay()
    torch.npu.synchronize()
    assert torch.equal(z.cpu(), torch.full((128,), 7.0))
    g2.reset()
    g1.reset()


def test_reset_releases_the_graphs_memory():
    torch.npu.synchronize()
    torch.npu.empty_cache()
    before = torch.npu.memory_reserved()
    x = torch.ones(1 << 20, device="npu")
    warm_up(lambda: x * 2)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        y = x * 2
    g.replay()
    torch.npu.synchronize()
    assert torch.equal(y.cpu()[:4], torch.full((4,), 2.0))
    del y
    g.reset()
    del x
    torch.npu.synchronize()
    torch.npu.empty_cache()
    assert torch.npu.memory_reserved() == before
