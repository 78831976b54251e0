"""torch.npu streams and events on braid-acl-sim's streams and events: work ordered by
wait_stream and events, record_stream, timing (simulated time), queries."""

import torch


def test_work_on_two_streams_joined_by_wait_stream():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    x = torch.ones(1 << 12, device="npu")
    with torch.npu.stream(s1):
        y = x * 2
    s2.wait_stream(s1)
    with torch.npu.stream(s2):
        z = y + 1
    y.record_stream(s2)
    s2.synchronize()
    assert torch.equal(z.cpu(), torch.full((1 << 12,), 3.0))
    assert s1.query() and s2.query()


def test_an_event_orders_one_stream_after_another():
    s1, s2 = torch.npu.Stream(), torch.npu.Stream()
    done = torch.npu.Event()
    with torch.npu.stream(s1):
        x = torch.full((256,), 4.0, device="npu")
        done.record()
    s2.wait_event(done)
    with torch.npu.stream(s2):
        y = x * x
    x.record_stream(s2)
    torch.npu.synchronize()
    assert done.query()
    assert torch.equal(y.cpu(), torch.full((256,), 16.0))


def test_elapsed_time_measures_the_work_between_two_events():
    start, end = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    x = torch.ones(1 << 16, device="npu")
    start.record()
    for _ in range(8):
        x = x * 1.0
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert ms > 0
    # Eight more launches take longer in simulated time.
    start.record()
    for _ in range(16):
        x = x * 1.0
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > ms


def test_the_current_and_default_streams():
    default = torch.npu.default_stream()
    assert torch.npu.current_stream() == default
    s = torch.npu.Stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() == s
    assert torch.npu.current_stream() == default
    assert s.npu_stream != default.npu_stream
