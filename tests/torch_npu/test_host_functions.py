"""Host functions as stream tasks: ``torch_npu.npu._subscribe_report`` starts a thread that
runs the host functions ``torch_npu.npu._launch_host_func`` launches on a stream
(``aclrtSubscribeReport``, ``aclrtLaunchCallback``, ``aclrtProcessReport``): eagerly, in stream
order with the device work around them, and captured into an ``NPUGraph``, run again at every
replay, as torch_npu's own test of the feature does. ``torch_npu.npu._launch_host_func_pending``
(``aclrtLaunchHostFunc``) needs no subscription: the runtime runs the function on a thread of
its own, as ``torch.ops.npu.save_npugraph_tensor`` relies on, eagerly and at every replay. Each
runs in a program of its own: the report thread lives until the stream is unsubscribed."""

import braid_npu


def test_eager_host_functions_run_in_stream_order(run_child, tmp_path):
    proc = run_child(
        """
        import torch, torch_npu
        torch_npu.npu.set_device(0)
        s = torch_npu.npu.Stream()
        torch_npu.npu._subscribe_report(s)
        seen = []
        def note(args):
            (x,) = args
            seen.append(x.cpu().tolist())
        with torch.npu.stream(s):
            x = torch.zeros(4, device="npu")
            x.fill_(3)
            torch_npu.npu._launch_host_func(torch.npu.current_stream(), note, [x])
            # The stream waits for the host function: it sees 3, never the 5 after it.
            x.fill_(5)
            torch_npu.npu._launch_host_func(torch.npu.current_stream(), note, [x])
        torch.npu.synchronize()
        torch_npu.npu._unsubscribe_report(s)
        braid_npu.result(seen)
        """
    )
    assert braid_npu.child_result(proc) == [[3.0] * 4, [5.0] * 4]
    # The report thread polls before its stream is subscribed and between functions: those
    # answers are not refusals, and the error log stays free of them.
    log = tmp_path / "child-errors.log"
    polls = [l for l in log.read_text().splitlines() if "aclrtProcessReport" in l] if log.exists() else []
    assert polls == [], polls[:3]


def test_a_host_function_captured_into_a_graph_runs_at_every_replay(run_child):
    # torch_npu's test_launch_host_func: the host function adds two matrix products into a
    # result on a stream of its own; capturing runs nothing, each replay runs every one.
    proc = run_child(
        """
        import torch, torch_npu
        torch_npu.npu.set_compile_mode(jit_compile=False)
        torch_npu.npu.set_device(0)
        callback_stream = torch.npu.Stream()
        calls = []
        def callback_add(params):
            with torch.npu.stream(callback_stream):
                x, y, result = params
                result.copy_(x + y)
            calls.append(1)
        capture_stream = torch_npu.npu.Stream()
        graph = torch_npu.npu.NPUGraph()
        torch_npu.npu._subscribe_report(capture_stream)
        a = torch.randn([5, 5]).npu()
        b = torch.randn([5, 5]).npu()
        result = torch.zeros([5, 5]).npu()
        counts = []
        with torch_npu.npu.stream(capture_stream):
            with torch_npu.npu.graph(graph, stream=capture_stream):
                params = [torch.matmul(a, b), torch.matmul(a, b), result]
                for _ in range(20):
                    torch_npu.npu._launch_host_func(torch.npu.current_stream(), callback_add, params)
            torch.npu.synchronize()
            counts.append(len(calls))
            for _ in range(3):
                graph.replay()
                torch.npu.synchronize()
                counts.append(len(calls))
        real = torch.matmul(a, b) + torch.matmul(a, b)
        torch.npu.synchronize()
        equal = torch.allclose(result.cpu(), real.cpu())
        torch_npu.npu._unsubscribe_report(capture_stream)
        braid_npu.result({"counts": counts, "equal": equal})
        """
    )
    done = braid_npu.child_result(proc)
    assert done == {"counts": [0, 20, 40, 60], "equal": True}


def test_pending_host_functions_run_in_stream_order_without_a_subscription(run_child):
    proc = run_child(
        """
        import torch, torch_npu
        torch_npu.npu.set_device(0)
        s = torch_npu.npu.Stream()
        seen = []
        def note(cpu):
            seen.append(cpu.tolist())
        with torch.npu.stream(s):
            x = torch.zeros(4, device="npu")
            x.fill_(3)
            first = x.to("cpu", non_blocking=True)
            torch_npu.npu._launch_host_func_pending(torch.npu.current_stream(), note, (first,))
            # The stream waits for the function: its copy holds 3, the next one 5.
            x.fill_(5)
            second = x.to("cpu", non_blocking=True)
            torch_npu.npu._launch_host_func_pending(torch.npu.current_stream(), note, (second,))
        torch.npu.synchronize()
        braid_npu.result(seen)
        """
    )
    assert braid_npu.child_result(proc) == [[3.0] * 4, [5.0] * 4]


def test_save_npugraph_tensor_saves_eagerly_and_at_every_replay(run_child):
    # torch_npu's save_npugraph_tensor (its own tests skip it "until CANN supports
    # aclrtLaunchHostFunc"): a copy to the host, then a host function that saves it; captured,
    # the path is fixed at capture and each replay saves the values of that replay.
    proc = run_child(
        """
        import os, torch, torch_npu
        torch_npu.npu.set_device(0)
        y = torch.arange(6, dtype=torch.float32, device="npu")
        torch.ops.npu.save_npugraph_tensor(y, save_path="y.pt")
        torch.npu.synchronize()
        eager = torch.load("y_device_0_0.pt").tolist()
        graph = torch_npu.npu.NPUGraph()
        z = torch.zeros(3, device="npu")
        with torch_npu.npu.graph(graph):
            z.add_(1)
            torch.ops.npu.save_npugraph_tensor(z, save_path="z.pt")
        torch.npu.synchronize()
        captured = os.path.exists("z_device_0_0.pt")
        replays = []
        for _ in range(3):
            graph.replay()
            torch.npu.synchronize()
            replays.append(torch.load("z_device_0_0.pt").tolist())
        braid_npu.result({"eager": eager, "captured": captured, "replays": replays})
        """
    )
    assert braid_npu.child_result(proc) == {
        "eager": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
        "captured": False,
        "replays": [[1.0] * 3, [2.0] * 3, [3.0] * 3],
    }
