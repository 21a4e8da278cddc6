#!/usr/bin/env python3
"""The export round trip through transformers: a model trained by lrc for 50
steps, exported with `lrc export RUN --hf`, loaded by transformers 4.44.2's
AutoModelForCausalLM (and its tokenizer by AutoTokenizer), gives the logits
lrc gives, within 1e-5 relative (max |difference| / max |lrc logit|).

    "$LRC_HF_PYTHON" tests/reference/hf_export_check.py LRC [--steps N]

Cases: layerrope (exports as llama), layerrope with Llama 3's RoPE scaling
(llama's rope_scaling), layerrope_peri (as gemma2), lns and peri, layerrope
with a mixture of 4 experts (as mixtral), at the
tiny preset on the default text. Needs transformers (the venv of
tests/reference/README.md), so CI runs tests/cli/hf_export.sh instead, which
checks the same directories through lrc's own loader. Exit status 1 when a
case is outside the tolerance.
"""

import os
import subprocess
import sys
import tempfile
from collections import OrderedDict

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402

TOL = 1e-5


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def case(lrc, tmp, name, norm, extra, steps):
    rund, out = os.path.join(tmp, name + ".run"), os.path.join(tmp, name + ".hf")
    sets = ["--set", "norm=" + norm]
    for kv in extra:
        sets += ["--set", kv]
    run([lrc, "train", "llama", "--preset", "tiny", *sets, "--steps", str(steps), "--lr", "3e-3",
         "--batch", "4", "--seq", "64", "--eval-every", str(steps), "-o", rund])
    run([lrc, "export", rund, "--hf", out])
    text = "In the beginning God created the heaven and the earth."
    tok = AutoTokenizer.from_pretrained(out)
    ids = tok(text)["input_ids"]
    assert ids == list(text.encode()), "the byte tokenizer must give the bytes"
    tokens = torch.tensor([ids], dtype=torch.int32)
    inp, lg = os.path.join(tmp, name + ".in.safetensors"), os.path.join(tmp, name + ".lg.safetensors")
    st.save(inp, OrderedDict(tokens=tokens))
    run([lrc, "forward", "llama", "--preset", "tiny", *sets, "--weights", os.path.join(rund, "model.safetensors"),
         "--input", inp, "-o", lg])
    want = st.load(lg)[0]["logits"].to(torch.float64)
    model = AutoModelForCausalLM.from_pretrained(out, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        got = model(input_ids=tokens.long()).logits.to(torch.float64)
    rel = ((got - want).abs().max() / want.abs().max()).item()
    ok = rel <= TOL
    print("  %-18s -> %-7s %s steps: transformers vs lrc logits, max |diff| / max |logit| = %.3e (tolerance %.0e) %s"
          % (name, model.config.model_type, steps, rel, TOL, "ok" if ok else "FAIL"))
    return ok


def main():
    lrc = os.path.abspath(sys.argv[1])
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        # head_dim 16 over an original context of 32: RoPE's wavelengths fall in
        # all three of llama3's regimes
        llama3 = ["rope_factor=8", "rope_low_freq=1", "rope_high_freq=4", "rope_orig_ctx=32"]
        cases = [("layerrope", "layerrope", []), ("layerrope_llama3", "layerrope", llama3),
                 ("layerrope_peri", "layerrope_peri", []), ("lns", "lns", []), ("peri", "peri", []),
                 ("layerrope_moe", "layerrope", ["n_experts=4", "experts_per_tok=2"])]
        results = [case(lrc, tmp, name, norm, extra, steps) for name, norm, extra in cases]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
