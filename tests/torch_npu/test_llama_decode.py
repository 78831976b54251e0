"""braid's Llama decoder (``cargo run -p braid --example llama_decode``) against transformers.

The example writes a CI-sized Llama model with seeded weights (``model.safetensors`` and
``config.json``, as transformers saves one), decodes two prompts greedily on 1, 2, 4 and 8
devices, and writes every device count's tokens and first-step logits (``--json``). This test
loads the very same files into transformers' ``LlamaForCausalLM`` on CPU torch, in float32,
and checks, on the simulator and through braid-acl-sim (``--features acl``), at every device
count: the greedy tokens are equal, and the first step's logits agree within 1e-4 relative
(the largest difference over the largest magnitude). It also checks that the tokens braid's
code keeps as transformers' (``ci::REFERENCE_TOKENS``, which ``braid demo`` and the Rust
tests compare with) are still what transformers generates.

The example is run as ``.ci/run`` builds it (release, before this suite), from a fresh shell
(none of braid-acl-sim's variables: through ACL it finds ``libbraid_acl_sim.so`` beside
itself, as ``.ci/run``'s run does).
"""

import json
import subprocess

import pytest
import torch

import braid_npu

REPO = braid_npu.HERE.parents[1]
RELATIVE = 1e-4


def run_example(tmp_path, backend):
    out = tmp_path / f"{backend}.json"
    features = ["--features", "acl"] if backend == "acl" else []
    proc = subprocess.run(
        ["cargo", "run", "--quiet", "--release", "-p", "braid", *features,
         "--example", "llama_decode", "--",
         "--dir", str(tmp_path / "model"), "--json", str(out), "--skip-7b"],
        cwd=REPO,
        env=braid_npu.fresh_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT correct=true" in proc.stdout, proc.stdout
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def braid_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llama")
    return {backend: run_example(tmp, backend) for backend in ("sim", "acl")}


@pytest.fixture(scope="module")
def reference(braid_runs):
    from transformers import LlamaForCausalLM

    run = braid_runs["sim"]
    model = LlamaForCausalLM.from_pretrained(run["model_dir"], dtype=torch.float32)
    model.eval()
    prompts = torch.tensor(run["prompts"], dtype=torch.long)
    with torch.no_grad():
        logits = model(prompts).logits[:, -1, :].float()
        generated = model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=run["generate"],
            do_sample=False,
        )
    return {
        "tokens": generated[:, prompts.shape[1]:].tolist(),
        "logits": logits,
    }


@pytest.mark.parametrize("backend", ["sim", "acl"])
def test_greedy_tokens_equal_transformers_on_every_device_count(braid_runs, reference, backend):
    runs = braid_runs[backend]["runs"]
    assert [r["devices"] for r in runs] == [1, 2, 4, 8]
    for run in runs:
        assert run["tokens"] == reference["tokens"], (backend, run["devices"])


@pytest.mark.parametrize("backend", ["sim", "acl"])
def test_first_step_logits_agree_within_1e_4_relative(braid_runs, reference, backend):
    ref = reference["logits"]
    scale = ref.abs().max().item()
    for run in braid_runs[backend]["runs"]:
        got = torch.tensor(run["first_logits"], dtype=torch.float32)
        assert got.shape == ref.shape
        worst = (got - ref).abs().max().item() / scale
        assert worst <= RELATIVE, (backend, run["devices"], worst)


def test_the_reference_tokens_braid_keeps_are_transformers(braid_runs, reference):
    assert braid_runs["sim"]["reference_tokens"] == reference["tokens"]
