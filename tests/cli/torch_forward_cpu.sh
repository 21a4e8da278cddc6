#!/bin/bash
# torch_forward_cpu.sh LRC ST_COMPARE — bench/gpu/torch_forward.py, the
# PyTorch side of the GPU benchmark, checked here without a GPU (--device
# cpu, f32): given lrc's weights and lrc's input file it computes lrc's
# function (the logits of lrc forward within 1e-5), and its static-KV-cache
# decoder picks the ids lrc generate picks. On the first H200 its logits were
# compared with lrc's on tokens of its own drawing (relative error 1.41: two
# functions of different inputs); --input is the fix.
set -u
lrc=$1 compare=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
here=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
failed=0
"$py" - "$out/in.st" <<'PY'
import json, struct, sys
B, T = 2, 32
ids = [(7 * i + 3) % 251 for i in range(B * T)]
h = json.dumps({"tokens": {"dtype": "I32", "shape": [B, T], "data_offsets": [0, 4 * B * T]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<%di" % (B * T), *ids))
PY
"$lrc" init llama --preset small --seed 1 -o "$out/w.st" >/dev/null &&
  "$lrc" forward llama --preset small --weights "$out/w.st" --input "$out/in.st" -o "$out/lrc.st" --target cpu >/dev/null &&
  "$py" "$here/bench/gpu/torch_forward.py" --device cpu --preset small --batch 2 --seq 32 --weights "$out/w.st" \
    --input "$out/in.st" --repeat 1 --logits "$out/torch.st" >/dev/null || { echo "FAIL: a command failed"; exit 1; }
"$compare" "$out/lrc.st" "$out/torch.st" logits 1e-5 || failed=1
# --input of another shape is refused, not run on
"$py" "$here/bench/gpu/torch_forward.py" --device cpu --preset small --batch 4 --seq 32 --weights "$out/w.st" \
  --input "$out/in.st" --repeat 1 >/dev/null 2>"$out/err" && { echo "FAIL: tokens of the wrong shape accepted"; failed=1; }
grep -q 'expected \[4, 32\]' "$out/err" || { echo "FAIL: the shape error says: $(cat "$out/err")"; failed=1; }
# decode: 12 greedy ids after a 16-token prompt, lrc generate (cpu) against the static-cache decoder
ids=$(awk 'BEGIN { for (j = 0; j < 16; j++) printf "%s%d", (j ? " " : ""), (7 * j + 3) % 256 }')
lrc_ids=$("$lrc" generate llama --preset small --weights "$out/w.st" --prompt-ids "$ids" -n 12 --temperature 0 2>/dev/null)
torch_ids=$("$py" "$here/bench/gpu/torch_forward.py" --device cpu --preset small --weights "$out/w.st" --decode 12 \
  --prompt-len 16 --ctx 64 | sed -n 's/^torch-decode-ids: //p')
if [ -n "$lrc_ids" ] && [ "$lrc_ids" = "$torch_ids" ]; then echo "decode: the same 12 ids ($lrc_ids)"; else
  echo "FAIL: decode ids: lrc '$lrc_ids', torch '$torch_ids'"; failed=1; fi
exit $failed
