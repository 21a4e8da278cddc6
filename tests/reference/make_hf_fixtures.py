#!/usr/bin/env python3
"""Hugging Face fixtures: random-init transformers models at small, odd shapes,
saved with save_pretrained into tests/fixtures/hf/<case>/ (config.json,
model.safetensors or shards with model.safetensors.index.json), with what
transformers computes on them:

  input.safetensors     'tokens' I32 [B, T]
  expected.safetensors  'logits' F32 [B, T, V]: the model run in f64 on the f32 weights
  grads.safetensors     'loss' and the gradient of every parameter (f64 autograd
                        through the transformers model, stored F32), names as saved
  generate.txt          a prompt's ids and model.generate(do_sample=False)'s 32 new ids (f32)

Norm weights and biases are moved away from their init (1 and 0), so that a
loader that skipped them would be caught. Needs transformers 4.44.2 over
Debian's torch 1.13 (a venv made with --system-site-packages; see
tests/reference/README.md). CI does not run this: the fixtures are committed.

    "$LRC_HF_PYTHON" tests/reference/make_hf_fixtures.py [--out DIR] [--only CASE,CASE]
"""

import json
import os
import shutil
import sys
from collections import OrderedDict

import torch
import transformers
from transformers import AutoModelForCausalLM

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402

B, T, NEW = 2, 7, 32

# transformers 4.44's HybridCache (gemma2's generate) marks its buffers for
# torch 2's compiler, which Debian's torch 1.13 lacks: a no-op mark is the
# same computation
if not hasattr(torch, "_dynamo"):
    import types
    torch._dynamo = types.SimpleNamespace(mark_static_address=lambda t: None)

# name -> (config class, keyword arguments, save options)
CASES = OrderedDict([
    ("llama_mha", ("LlamaConfig", dict(hidden_size=48, intermediate_size=72, num_attention_heads=4,
                                       num_hidden_layers=2, vocab_size=67, rope_theta=5000.0), {})),
    ("llama_gqa_bias", ("LlamaConfig", dict(hidden_size=48, intermediate_size=70, num_attention_heads=6,
                                            num_key_value_heads=2, num_hidden_layers=3, vocab_size=61,
                                            attention_bias=True, mlp_bias=True, rms_norm_eps=1e-5),
                        dict(max_shard_size="40KB"))),
    ("llama_mqa_tied", ("LlamaConfig", dict(hidden_size=40, intermediate_size=56, num_attention_heads=5,
                                            num_key_value_heads=1, num_hidden_layers=2, vocab_size=53,
                                            tie_word_embeddings=True), dict(bf16=True))),
    ("qwen2_tied", ("Qwen2Config", dict(hidden_size=48, intermediate_size=64, num_attention_heads=6,
                                        num_key_value_heads=3, num_hidden_layers=2, vocab_size=59,
                                        tie_word_embeddings=True, rope_theta=1000000.0), {})),
    ("mistral_window", ("MistralConfig", dict(hidden_size=40, intermediate_size=56, num_attention_heads=4,
                                              num_key_value_heads=2, head_dim=16, num_hidden_layers=2,
                                              vocab_size=61, sliding_window=3), {})),
    ("phi3_fused", ("Phi3Config", dict(hidden_size=48, intermediate_size=60, num_attention_heads=6,
                                        num_key_value_heads=3, num_hidden_layers=2, vocab_size=67,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2), {})),
    ("olmo_plain", ("OlmoConfig", dict(hidden_size=40, intermediate_size=56, num_attention_heads=4,
                                       num_hidden_layers=2, vocab_size=53, pad_token_id=0,
                                       eos_token_id=1, attention_bias=True), {})),
    ("gemma_geglu", ("GemmaConfig", dict(hidden_size=48, intermediate_size=64, num_attention_heads=4,
                                          num_key_value_heads=2, head_dim=16, num_hidden_layers=2,
                                          vocab_size=61), {})),
    ("gemma2_capped", ("Gemma2Config", dict(hidden_size=40, intermediate_size=56, num_attention_heads=4,
                                            num_key_value_heads=2, head_dim=12, num_hidden_layers=3,
                                            vocab_size=67, sliding_window=3, query_pre_attn_scalar=10,
                                            attn_logit_softcapping=0.3, final_logit_softcapping=0.2), {})),
    ("gpt2_conv1d", ("GPT2Config", dict(n_embd=48, n_layer=2, n_head=4, n_positions=48, vocab_size=61,
                                         n_inner=80, layer_norm_epsilon=1e-5), {})),
    # head_dim 12 over an original context of 64: the six RoPE wavelengths (6 to 13 500 positions)
    # fall in llama3's three regimes (kept, smoothed, divided by the factor)
    ("llama_rope_llama3", ("LlamaConfig", dict(hidden_size=48, intermediate_size=64, num_attention_heads=4,
                                               num_key_value_heads=2, num_hidden_layers=2, vocab_size=59,
                                               max_position_embeddings=512,
                                               rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                 high_freq_factor=4.0,
                                                                 original_max_position_embeddings=64)), {})),
    ("llama_rope_linear", ("LlamaConfig", dict(hidden_size=40, intermediate_size=56, num_attention_heads=4,
                                               num_hidden_layers=2, vocab_size=53, rope_theta=500.0,
                                               rope_scaling=dict(type="linear", factor=4.0)), {})),
    ("mixtral_moe", ("MixtralConfig", dict(hidden_size=40, intermediate_size=36, num_attention_heads=4,
                                           num_key_value_heads=2, num_hidden_layers=2, vocab_size=61,
                                           num_local_experts=5, num_experts_per_tok=2), {})),
    # routing ties: experts 1, 2 and 3 have zero router rows, so their scores are exactly equal
    # (0) in every row and torch.topk's tie order picks which of them serve (and with k = 3,
    # which slot each takes)
    ("mixtral_ties", ("MixtralConfig", dict(hidden_size=32, intermediate_size=24, num_attention_heads=4,
                                            num_key_value_heads=4, num_hidden_layers=2, vocab_size=53,
                                            num_local_experts=6, num_experts_per_tok=3),
                      dict(zero_router_rows=[1, 2, 3]))),
])


def perturb(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or ".ln_" in name or name.endswith(".bias"):
                p.add_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def make_case(out, name, cls_name, kwargs, opts, seed):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    config = getattr(transformers, cls_name)(**kwargs)
    config._attn_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.eval()
    perturb(model, gen)
    if opts.get("zero_router_rows"):
        with torch.no_grad():
            for pname, p in model.named_parameters():
                if pname.endswith("block_sparse_moe.gate.weight"):
                    p[opts["zero_router_rows"]] = 0.0
    if opts.get("bf16"):  # weights exactly representable in bf16: lrc reads the bf16 file exactly
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    tokens = torch.randint(0, config.vocab_size, (B, T), generator=gen)
    prompt = torch.randint(0, config.vocab_size, (1, 5), generator=gen)

    # greedy continuation in f32, as a user runs it (no end token: all NEW come)
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    cont = model.generate(prompt, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                          pad_token_id=0, attention_mask=torch.ones_like(prompt))[0, prompt.shape[1]:]
    assert len(cont) == NEW

    save = dict(safe_serialization=True)
    if "max_shard_size" in opts:
        save["max_shard_size"] = opts["max_shard_size"]
    if opts.get("bf16"):  # the weights alone: model.to(bfloat16) would round RoPE's inv_freq buffer too
        model.config.torch_dtype = torch.bfloat16
        sd = OrderedDict((k, v.to(torch.bfloat16)) for k, v in model.state_dict().items()
                         if not (config.tie_word_embeddings and k == "lm_head.weight"))  # as save_pretrained drops it
        model.save_pretrained(d, state_dict=sd, **save)
    else:
        model.save_pretrained(d, **save)

    m64 = model.to(torch.float64)
    out64 = m64(input_ids=tokens, labels=tokens)
    out64.loss.backward()
    st.save(os.path.join(d, "input.safetensors"), OrderedDict(tokens=tokens.to(torch.int32)))
    st.save(os.path.join(d, "expected.safetensors"),
            OrderedDict(logits=out64.logits.detach().to(torch.float32).contiguous()))
    grads = OrderedDict(loss=out64.loss.detach().to(torch.float32).reshape(()))
    saved = set(st_names(d))
    for pname, p in m64.named_parameters():
        if pname in saved:  # a tied lm_head is the embedding, saved once
            grads[pname] = p.grad.to(torch.float32).contiguous()
    st.save(os.path.join(d, "grads.safetensors"), grads)
    with open(os.path.join(d, "generate.txt"), "w") as f:
        f.write("prompt %s\n" % " ".join(str(int(t)) for t in prompt[0]))
        f.write("greedy %s\n" % " ".join(str(int(t)) for t in cont))
    os.remove(os.path.join(d, "generation_config.json"))
    print("  hf/%-16s loss %.6f  %d tensors" % (name, out64.loss.item(), len(grads) - 1))


def st_names(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        return list(json.load(open(idx))["weight_map"])
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf")
    if "--out" in sys.argv:
        out = os.path.join(sys.argv[sys.argv.index("--out") + 1], "hf")
    assert transformers.__version__ == "4.44.2", transformers.__version__
    torch.set_num_threads(1)
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    for i, (name, (cls, kw, opts)) in enumerate(CASES.items()):
        if only is None or name in only:  # each case's seed is its place in CASES either way
            make_case(out, name, cls, kw, opts, 1000 + i)


if __name__ == "__main__":
    main()
