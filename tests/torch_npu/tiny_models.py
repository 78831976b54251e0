"""Tiny transformer models from HuggingFace ``transformers`` for the torch_npu suite and its
child programs: Llama and Qwen2 (grouped-query attention: 4 heads sharing 2 key/value
heads) and GPT-2, each with hidden size 64 and 2 layers, built from a config with random
weights from a fixed seed (no download). The initialiser's range is wider than the default
so that greedy decoding picks varied tokens (with the default, GPT-2 repeats one).

``decode`` runs a prompt and greedy decode steps with a static KV cache, eagerly or with the
decode step captured in an ``NPUGraph`` and replayed."""

import ctypes

import torch

KINDS = ("llama", "qwen2", "gpt2")
PROMPT = [1, 5, 9, 33, 7, 2]


def build(kind, attn="eager", seed=0):
    """The model ``kind`` on the CPU in float32, in eval mode, with ``attn`` attention."""
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    torch.manual_seed(seed)
    common = dict(vocab_size=128, initializer_range=0.2)
    if kind == "gpt2":
        config = GPT2Config(
            n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
            **common,
        )
        model = GPT2LMHeadModel
    else:
        config_type, model = {
            "llama": (LlamaConfig, LlamaForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM),
        }[kind]
        config = config_type(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            **common,
        )
    config._attn_implementation = attn
    return model(config).eval()


def prompt(device):
    return torch.tensor([PROMPT], device=device)


def decode(model, steps, graph=False, max_cache_len=16):
    """Greedy tokens after the prompt: the prompt's next token, then ``steps`` decode steps
    with a static KV cache (StaticCache advances its own position on the device). With
    ``graph``, the first decode step runs eagerly (it warms up) and the next one is captured
    with ``torch.npu.graph`` and replayed for the others, its inputs updated in place."""
    from transformers import StaticCache

    device = next(model.parameters()).device
    with torch.no_grad():
        cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
        ids = prompt(device)
        positions = torch.arange(ids.shape[1], device=device)
        logits = model(ids, past_key_values=cache, use_cache=True, cache_position=positions).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        position = torch.tensor([ids.shape[1]], device=device)
        tokens = [token.item()]

        def step(token, position):
            out = model(token, past_key_values=cache, cache_position=position).logits
            return out[:, -1].argmax(-1, keepdim=True)

        if not graph:
            for _ in range(steps):
                token = step(token, position)
                position = position + 1
                tokens.append(token.item())
            return tokens
        token = step(token, position)
        position = position + 1
        tokens.append(token.item())
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            next_token = step(token, position)
        for _ in range(steps - 1):
            g.replay()
            tokens.append(next_token.item())
            token.copy_(next_token)
            position.add_(1)
        return tokens


def missing_operators(*names):
    """The aclnn operators among ``names`` that the loaded braid-acl-sim does not export."""
    with open("/proc/self/maps") as maps:
        paths = {l.split()[-1] for l in maps if "libbraid_acl_sim.so" in l}
    lib = ctypes.CDLL(sorted(paths)[0]) if paths else None
    return [n for n in names if lib is None or not hasattr(lib, n)]


#: What SDPA (transformers' default attention) needs that may not be exported yet.
SDPA_OPERATORS = ("aclnnFlashAttentionScore", "aclnnFlashAttentionScoreGetWorkspaceSize")
