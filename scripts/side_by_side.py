"""Times the same operators on torch on the CPU, on torch_npu over braid-acl-sim, and on
braid's simulator directly, in one run, and prints each ratio to torch on the CPU.

Run it with ``scripts/side_by_side.sh`` (it builds what this needs and starts it under
``braid-acl-sim run``, so that torch_npu's device is braid-acl-sim's simulator). The three
columns are measured one after another in this process and its child, on the same machine
within seconds, with the same thread count (``--threads``: torch's intra-op threads and
``BRAID_SIM_THREADS``), so their ratios hold even where the machine is shared and its absolute
speed varies from run to run.

- torch CPU: the operator on CPU tensors (torch computes synchronously).
- torch_npu: the operator on ``npu`` tensors, then ``torch.npu.synchronize()``: torch_npu's
  dispatch, braid-acl-sim's aclnn export and the simulator's launch, compute and store.
- braid sim: the operator launched on a simulated stream and synchronized, from Rust
  (``sim_kernel_times``, benches/src/bin): the simulator without torch.

Each figure is the fastest of ``--repeat`` runs: on a shared machine, the run least
disturbed by other work. The columns of a case take turns, five timed runs at a time, so that a
change in the machine's load touches all of them alike; each turn first runs its column untimed
for ``WARM_S`` seconds, since the column before it leaves threads busy behind it: torch's
OpenMP workers spin 300,000 times before they sleep (libgomp's default, ``GOMP_SPINCOUNT``),
milliseconds in which the next column's threads share the cores with them.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

MATMUL_SIZES = (256, 1024, 2048)
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def cases():
    """(name, what to time) of every case: the name is the timing binary's case too."""
    out = []
    for n in MATMUL_SIZES:
        for d in DTYPES:
            out.append((f"matmul:{n}:{d}", ("matmul", n, DTYPES[d])))
    for op in ("add", "mul"):
        for n in (16 * 1024, 1024 * 1024):
            out.append((f"{op}:{n}", (op, n)))
    out.append(("softmax:64:4096", ("softmax", 64, 4096)))
    out.append(("rmsnorm:64:4096", ("rmsnorm", 64, 4096)))
    return out


def operands(spec, device):
    """The tensors of a case and the function computing it."""
    gen = torch.Generator().manual_seed(0)

    def rand(*shape, dtype=torch.float32):
        return (torch.rand(*shape, generator=gen) * 2 - 1).to(dtype).to(device)

    kind = spec[0]
    if kind == "matmul":
        _, n, dtype = spec
        a, b = rand(n, n, dtype=dtype), rand(n, n, dtype=dtype)
        out = torch.empty(n, n, dtype=dtype, device=device)
        return lambda: torch.mm(a, b, out=out)
    if kind in ("add", "mul"):
        _, n = spec
        a, b = rand(n), rand(n)
        out = torch.empty(n, device=device)
        fn = torch.add if kind == "add" else torch.mul
        return lambda: fn(a, b, out=out)
    if kind == "softmax":
        _, r, c = spec
        x = rand(r, c)
        return lambda: torch.softmax(x, dim=-1)
    if kind == "rmsnorm":
        _, r, c = spec
        x, gamma = rand(r, c), rand(c)
        if device == "cpu":
            return lambda: torch.nn.functional.rms_norm(x, (c,), gamma, 1e-6)
        import torch_npu

        return lambda: torch_npu.npu_rms_norm(x, gamma, 1e-6)
    raise ValueError(kind)


def once(fn, sync):
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


#: Timed runs of one column in a turn.
BLOCK = 5
#: Seconds a column runs untimed at the start of each of its turns (see the module's text).
WARM_S = 0.02


def turn_of(run):
    """A column's turn (the fastest of ``BLOCK`` timed runs, after ``WARM_S`` seconds of runs
    untimed) from ``run``, which times one run."""

    def turn():
        start = time.perf_counter()
        run()
        while time.perf_counter() - start < WARM_S:
            run()
        return min(run() for _ in range(BLOCK))

    return turn


def interleaved(columns, repeat):
    """The fastest run of each column (a function taking one turn and returning its fastest
    run; ``None``: not measured), the columns taking turns until each has made ``repeat`` timed
    runs (at least two turns): a change in the machine's load touches all of them alike. A
    column that fails is reported and left out."""
    best = [None] * len(columns)
    for _ in range(max(2, -(-repeat // BLOCK))):
        for i, column in enumerate(columns):
            if column is None:
                continue
            try:
                t = column()
            except Exception as e:  # an operator braid-acl-sim refuses: say so, go on
                print(f"failed: {str(e).splitlines()[0]}", file=sys.stderr)
                columns[i] = None
                best[i] = None
                continue
            if best[i] is None or t < best[i]:
                best[i] = t
    return best


def llama_models():
    """The Llama forwards to time: (name, build(device) -> forward), or [] where transformers
    is missing. ``tiny-llama``: the torch_npu suite's tiny Llama (tests/torch_npu/tiny_models.py:
    hidden 64, 2 layers, grouped-query attention) on its 6-token prompt, where per-operator
    costs dominate; ``llama-h256``: hidden 256, 2 layers, 64 tokens, where computing shows."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return []
    sys.path.insert(0, str(ROOT / "tests" / "torch_npu"))
    import tiny_models

    def tiny(device):
        model = tiny_models.build("llama").to(device)
        ids = tiny_models.prompt(device)
        return lambda: model(ids).logits

    def h256(device):
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=1024,
            hidden_size=256,
            intermediate_size=688,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=128,
        )
        config._attn_implementation = "eager"
        model = LlamaForCausalLM(config).eval().to(device)
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, config.vocab_size, (1, 64), generator=gen).to(device)
        return lambda: model(ids).logits

    return [("tiny-llama forward", tiny), ("llama-h256 forward", h256)]


def sim_times(binary, names, threads):
    """One turn of the timing binary over ``names``: each case's fastest of ``BLOCK`` runs,
    after ``WARM_S`` seconds of runs untimed."""
    env = dict(os.environ, BRAID_SIM_THREADS=str(threads))
    warm_ms = str(round(WARM_S * 1000))
    out = subprocess.run(
        [str(binary), "--repeat", str(BLOCK), "--warm-ms", warm_ms, *names],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line}


def fmt(seconds):
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def ratio(x, base):
    return "-" if x is None or base is None else f"{x / base:.2f}x"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument(
        "--sim-bin",
        type=Path,
        default=ROOT / "target" / "release" / "sim_kernel_times",
        help="the timing binary (cargo build --release -p braid-benches --bin sim_kernel_times)",
    )
    p.add_argument("--no-npu", action="store_true", help="skip torch_npu (torch CPU and braid sim only)")
    p.add_argument("--only", help="run only the cases whose name contains this")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    # braid-acl-sim's devices (in this process) read it when torch_npu makes them.
    os.environ["BRAID_SIM_THREADS"] = str(args.threads)

    npu = None
    if not args.no_npu:
        import torch_npu  # noqa: F401

        npu = "npu"
    selected = [(n, s) for n, s in cases() if not args.only or args.only in n]

    print(
        f"threads: {args.threads} (torch.get_num_threads() = {torch.get_num_threads()}, "
        f"BRAID_SIM_THREADS={args.threads}); {os.cpu_count()} cores; "
        f"TASK_QUEUE_ENABLE={os.environ.get('TASK_QUEUE_ENABLE', 'unset')}"
    )
    header = ("case", "torch CPU", "torch_npu", "ratio", "braid sim", "ratio")
    rows = []
    for name, spec in selected:
        cpu_fn = operands(spec, "cpu")
        columns = [turn_of(lambda: once(cpu_fn, lambda: None)), None, None]
        if npu:
            npu_fn = operands(spec, npu)
            columns[1] = turn_of(lambda: once(npu_fn, torch.npu.synchronize))
        # The simulator alone: a run of its timing binary per turn.
        columns[2] = lambda: sim_times(args.sim_bin, [name], args.threads)[name]
        cpu, on_npu, direct = interleaved(columns, args.repeat)
        rows.append((name, cpu, on_npu, direct))
    for name, build in llama_models():
        if args.only and args.only not in name:
            continue
        with torch.no_grad():
            cpu_fwd = build("cpu")
            columns = [turn_of(lambda: once(cpu_fwd, lambda: None)), None]
            if npu:
                npu_fwd = build(npu)
                columns[1] = turn_of(lambda: once(npu_fwd, torch.npu.synchronize))
            cpu, on_npu = interleaved(columns, args.repeat)
        rows.append((name, cpu, on_npu, None))
    widths = [20, 11, 11, 8, 11, 8]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for name, cpu, on_npu, direct in rows:
        cells = (name, fmt(cpu), fmt(on_npu), ratio(on_npu, cpu), fmt(direct), ratio(direct, cpu))
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))


if __name__ == "__main__":
    main()
