#!/usr/bin/env python3
"""Reference fixtures of seven architectures (issue 50): tests/fixtures/arch/<case>/.

Five are transformers 4.44.2 models, random-init and saved with save_pretrained
(config.json, model.safetensors): mamba (MambaForCausalLM, its pure-torch path),
bert_padded (BertForMaskedLM on a padded batch), whisper_cross (WhisperForCausalLM, the
decoder alone, cross-attending to given encoder states of another length), rwkv4
(RwkvForCausalLM, its pure-torch path) and gpt_neox (GPTNeoXForCausalLM, parallel
residual, partial rotary). Two are the PyTorch references written from their papers,
saved as config.json + weights.safetensors under the reference's names: diff_attn
(diff_attn_ref.py) and mla (mla_ref.py). Each case also has

  input.safetensors     'tokens' I32 [B, T], and the case's run-time inputs
  expected.safetensors  'logits' F32: the model run in f64 on the f32 weights
  grads.safetensors     'loss' (F32 scalar) and the gradient of every saved parameter
                        (f64 autograd, stored F32), under the parameter's name

The loss is the next-token cross-entropy (logits[:, :-1] against tokens[:, 1:], mean)
for the decoders and the masked-LM cross-entropy over labels != -100 (mean) for BERT,
computed here the same way for every case. Norm weights and biases, and the
parameters an architecture initialises to a neutral value (Mamba's D and A_log, RWKV's
time_decay, time_first and time_mix), are moved off their init so that each matters.

The f64 run keeps f64 where transformers casts down to f32 (RMSNorm's variance, Mamba's
A, B and u, RWKV's keys and states: `Keep64` below makes a down-cast of an f64 tensor a
no-op), so the expected values are f64 computations of the architectures' formulas.

Needs transformers 4.44.2 over Debian's torch 1.13 (tests/reference/README.md); CI does
not run this and fixtures_regen does not regenerate arch/: the fixtures are committed.
Seeded; a rerun writes the same bytes.

    VENV/bin/python tests/reference/make_arch_fixtures.py [--out DIR] [--only CASE,CASE]

where VENV is a venv with transformers over Debian's torch, made as
tests/reference/README.md says for make_hf_fixtures.py.
"""

import json
import os
import shutil
import sys
from collections import OrderedDict

import torch
import torch.nn.functional as F
import transformers
from torch.overrides import TorchFunctionMode

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diff_attn_ref  # noqa: E402
import mla_ref  # noqa: E402
import safetensors_io as st  # noqa: E402

B = 2


class Keep64(TorchFunctionMode):
    """Within it, converting an f64 tensor to f32 (`.float()`, `.to(torch.float32)`,
    `dtype=torch.float32`) leaves it f64."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        t = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if t is not None and t.dtype == torch.float64:
            if func is torch.Tensor.float:
                return t
            if func is torch.Tensor.to and any(a is torch.float32 for a in list(args[1:]) + list(kwargs.values())):
                return t
        if kwargs.get("dtype") is torch.float32 and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args):
            kwargs["dtype"] = torch.float64
        return func(*args, **kwargs)


def randn(gen, shape, scale=1.0):
    return scale * torch.randn(shape, generator=gen, dtype=torch.float32)


def perturb(model, gen, extra=()):
    """Norms and biases off 1 and 0; parameters whose name ends with one of `extra`
    (suffix, scale) moved by N(0, scale^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or ".ln" in name or "LayerNorm" in name or name.endswith("bias"):
                p.add_(randn(gen, p.shape, 0.2))
            for suffix, scale in extra:
                if name.endswith(suffix):
                    p.add_(randn(gen, p.shape, scale))


def causal_loss(logits, inp):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), inp["tokens"][:, 1:].reshape(-1).long())


def mlm_loss(logits, inp):
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), inp["labels"].reshape(-1).long(), ignore_index=-100)


def hf_config(cls_name, **kw):
    cfg = getattr(transformers, cls_name)(**kw)
    cfg._attn_implementation = "eager"
    return cfg


# ---- the cases: each builds (model, inputs, forward(model, inputs64) -> logits, loss) ----

def case_mamba(gen):
    # residual_in_fp32 only matters below f32; off, so that the f64 run stays f64
    cfg = hf_config("MambaConfig", vocab_size=61, hidden_size=24, state_size=6, num_hidden_layers=2,
                    expand=2, conv_kernel=4, time_step_rank=3, layer_norm_epsilon=1e-5,
                    residual_in_fp32=False, time_step_min=0.05, time_step_max=0.5,
                    use_cache=False)
    model = transformers.MambaForCausalLM(cfg)
    perturb(model, gen, [(".D", 0.5), (".A_log", 0.3)])
    with torch.no_grad():  # larger B and C than the default init, so that the scan's share is not small beside D's
        for layer in model.backbone.layers:
            layer.mixer.x_proj.weight.mul_(4.0)
    tokens = torch.randint(0, cfg.vocab_size, (B, 9), generator=gen)
    fwd = lambda m, i: m(input_ids=i["tokens"], use_cache=False).logits  # noqa: E731
    return model, OrderedDict(tokens=tokens), fwd, causal_loss


def case_bert_padded(gen):
    cfg = hf_config("BertConfig", vocab_size=71, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=48, max_position_embeddings=16, hidden_act="gelu", pad_token_id=0,
                    initializer_range=0.2)
    model = transformers.BertForMaskedLM(cfg)
    perturb(model, gen)
    with torch.no_grad():  # the padding row starts at zero: give it a value too
        model.bert.embeddings.word_embeddings.weight[0].add_(randn(gen, (32,), 0.02))
    T, lengths = 9, (9, 6)
    tokens = torch.randint(1, cfg.vocab_size, (B, T), generator=gen)
    mask = torch.zeros(B, T)
    labels = torch.full((B, T), -100, dtype=torch.long)
    for b, (n, where) in enumerate(zip(lengths, ([1, 4, 7], [0, 3]))):
        tokens[b, n:] = 0
        mask[b, :n] = 1.0
        labels[b, where] = torch.randint(1, cfg.vocab_size, (len(where),), generator=gen)
    inp = OrderedDict(tokens=tokens, attention_mask=mask, token_type_ids=torch.zeros(B, T, dtype=torch.long),
                      labels=labels)
    fwd = lambda m, i: m(input_ids=i["tokens"], attention_mask=i["attention_mask"],  # noqa: E731
                         token_type_ids=i["token_type_ids"]).logits
    return model, inp, fwd, mlm_loss


def case_whisper_cross(gen):
    cfg = hf_config("WhisperConfig", vocab_size=67, d_model=24, decoder_layers=2, decoder_attention_heads=3,
                    decoder_ffn_dim=40, max_target_positions=16, encoder_layers=1, encoder_attention_heads=3,
                    encoder_ffn_dim=40, max_source_positions=16, num_mel_bins=8, pad_token_id=0,
                    bos_token_id=1, eos_token_id=1, decoder_start_token_id=1, suppress_tokens=None,
                    begin_suppress_tokens=None, activation_function="gelu", init_std=0.2, use_cache=False)
    model = transformers.WhisperForCausalLM(cfg)
    perturb(model, gen)
    with torch.no_grad():
        model.model.decoder.embed_tokens.weight[0].add_(randn(gen, (24,), 0.02))
    # S = 5 < T = 9: more queries than keys
    tokens = torch.randint(1, cfg.vocab_size, (B, 9), generator=gen)
    enc = randn(gen, (B, 5, cfg.d_model))
    fwd = lambda m, i: m(input_ids=i["tokens"], encoder_outputs=(i["encoder_states"],),  # noqa: E731
                         use_cache=False).logits
    return model, OrderedDict(tokens=tokens, encoder_states=enc), fwd, causal_loss


def case_rwkv4(gen):
    # rescale_every 0: no halving of the residual stream in eval mode
    cfg = hf_config("RwkvConfig", vocab_size=61, context_length=16, hidden_size=24, num_hidden_layers=2,
                    intermediate_size=56, layer_norm_epsilon=1e-5, rescale_every=0, tie_word_embeddings=False,
                    bos_token_id=0, eos_token_id=0, use_cache=False)
    model = transformers.RwkvForCausalLM(cfg)
    perturb(model, gen, [("time_decay", 0.5), ("time_first", 0.5), ("time_mix_key", 0.2),
                         ("time_mix_value", 0.2), ("time_mix_receptance", 0.2)])
    tokens = torch.randint(0, cfg.vocab_size, (B, 9), generator=gen)
    fwd = lambda m, i: m(input_ids=i["tokens"], use_cache=False).logits  # noqa: E731
    return model, OrderedDict(tokens=tokens), fwd, causal_loss


def case_gpt_neox(gen):
    cfg = hf_config("GPTNeoXConfig", vocab_size=61, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                    intermediate_size=52, rotary_pct=0.5, rotary_emb_base=10000, max_position_embeddings=16,
                    use_parallel_residual=True, layer_norm_eps=1e-5, hidden_act="gelu", attention_bias=True,
                    tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, initializer_range=0.2,
                    use_cache=False)
    model = transformers.GPTNeoXForCausalLM(cfg)
    perturb(model, gen)
    tokens = torch.randint(0, cfg.vocab_size, (B, 9), generator=gen)
    fwd = lambda m, i: m(input_ids=i["tokens"], use_cache=False).logits  # noqa: E731
    return model, OrderedDict(tokens=tokens), fwd, causal_loss


def case_ref(ref, model_cls, T):
    def build(gen):
        cfg = ref.Config()
        model = model_cls(cfg)
        ref.init_params(model, gen)
        tokens = torch.randint(0, cfg.vocab_size, (B, T), generator=gen)
        return model, OrderedDict(tokens=tokens), (lambda m, i: m(i["tokens"])), causal_loss
    return build


CASES = OrderedDict([
    ("mamba", case_mamba),
    ("bert_padded", case_bert_padded),
    ("whisper_cross", case_whisper_cross),
    ("diff_attn", case_ref(diff_attn_ref, diff_attn_ref.DiffTransformer, 9)),
    ("mla", case_ref(mla_ref, mla_ref.MLAModel, 8)),
    ("rwkv4", case_rwkv4),
    ("gpt_neox", case_gpt_neox),
])


def saved_names(d):
    name = "model.safetensors" if os.path.exists(os.path.join(d, "model.safetensors")) else "weights.safetensors"
    with open(os.path.join(d, name), "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def save_model(model, d):
    if isinstance(model, transformers.PreTrainedModel):
        model.save_pretrained(d, safe_serialization=True)
        gc = os.path.join(d, "generation_config.json")
        if os.path.exists(gc):
            os.remove(gc)
        return
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(sys.modules[type(model).__module__].config_json(model.cfg))
    st.save(os.path.join(d, "weights.safetensors"),
            OrderedDict((k, v.detach().to(torch.float32).contiguous()) for k, v in model.state_dict().items()))


def input_tensor(t):
    """As stored: integer inputs I32, float ones F32."""
    return t.to(torch.int32) if not t.is_floating_point() else t.to(torch.float32).contiguous()


def make_case(out, name, build, seed):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model, inp, fwd, loss_fn = build(gen)
    model.eval()
    save_model(model, d)

    m64 = model.to(torch.float64)
    inp64 = OrderedDict((k, v.to(torch.float64) if v.is_floating_point() else v) for k, v in inp.items())
    torch.set_default_dtype(torch.float64)  # GPT-NeoX fills its mask with f64's min by torch.full
    try:
        with Keep64():
            logits = fwd(m64, inp64)
            assert logits.dtype == torch.float64, logits.dtype
            loss = loss_fn(logits, inp64)
    finally:
        torch.set_default_dtype(torch.float32)
    loss.backward()

    st.save(os.path.join(d, "input.safetensors"), OrderedDict((k, input_tensor(v)) for k, v in inp.items()))
    st.save(os.path.join(d, "expected.safetensors"),
            OrderedDict(logits=logits.detach().to(torch.float32).contiguous()))
    grads = OrderedDict(loss=loss.detach().to(torch.float32).reshape(()))
    params = dict(m64.named_parameters())
    for pname in saved_names(d):
        g = params[pname].grad
        assert g is not None and bool(g.abs().max() > 0), "%s: %s has no gradient" % (name, pname)
        grads[pname] = g.to(torch.float32).contiguous()
    st.save(os.path.join(d, "grads.safetensors"), grads)
    print("  arch/%-14s loss %.6f  %d tensors" % (name, loss.item(), len(grads) - 1))


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "arch")
    if "--out" in sys.argv:
        out = os.path.join(sys.argv[sys.argv.index("--out") + 1], "arch")
    assert transformers.__version__ == "4.44.2", transformers.__version__
    torch.set_num_threads(1)
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    for i, (name, build) in enumerate(CASES.items()):
        if only is None or name in only:  # each case's seed is its place in CASES either way
            make_case(out, name, build, 3000 + i)


if __name__ == "__main__":
    main()
