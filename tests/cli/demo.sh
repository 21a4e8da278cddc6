#!/bin/bash
# demo.sh LRC — the README's main job (`lrc demo --seed 1`), its figures
# checked: exit status 0, the cpu target within 1e-5 of ref, and the
# next-byte loss and parameter count it prints equal to what `lrc init` with
# the same seed, `lrc forward --target ref` and a loss computed here in
# Python give (a model whose logits were all zeros would print ln 256 and
# fail; before, a regex on "5.x nats" was the whole test).
lrc=$1
source "$(dirname "$0")/../tools/check.sh"
prompt="In the beginning God created the heaven and the earth."
"$lrc" demo --seed 1 >"$dir/demo.txt"
status=$?
cat "$dir/demo.txt"
check "demo exits 0" "[ $status = 0 ]"
diff=$(awk '/cpu vs ref/ {print $NF}' "$dir/demo.txt")
loss=$(awk '/next-byte loss/ {print $3}' "$dir/demo.txt")
params=$(awk '/^  parameters/ {print $2}' "$dir/demo.txt")
num='^[0-9]+(\.[0-9]+)?(e[-+][0-9]+)?$'
check "cpu vs ref printed ($diff) and within 1e-5" "[[ '$diff' =~ \$num ]] && awk 'BEGIN { exit !($diff <= 1e-5) }'"
M=(llama --preset small --set norm=layerrope)
"$lrc" init "${M[@]}" --seed 1 -o "$dir/w.st" >/dev/null
python3 - "$dir/in.st" "$prompt" <<'PY'
import json, struct, sys
ids = list(sys.argv[2].encode())
h = json.dumps({"tokens": {"dtype": "I32", "shape": [1, len(ids)], "data_offsets": [0, 4 * len(ids)]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<%di" % len(ids), *ids))
PY
"$lrc" forward "${M[@]}" --weights "$dir/w.st" --input "$dir/in.st" -o "$dir/out.st" --target ref >/dev/null
want=$(PYTHONPATH="$(dirname "$0")/../tools" python3 - "$dir/out.st" "$prompt" <<'PY'
import math, sys
import st
_, shape, a = st.arrays(sys.argv[1])["logits"]
p, V = sys.argv[2].encode(), shape[-1]
loss = 0.0
for i in range(len(p) - 1):
    row = a[i * V:(i + 1) * V]
    m = max(row)
    loss += m + math.log(sum(math.exp(x - m) for x in row)) - row[p[i + 1]]
print("%.6f" % (loss / (len(p) - 1)))
PY
)
echo "loss from lrc forward --target ref and Python: $want; demo printed $loss"
check "the demo's loss is the loss of its model (within 1e-4, it prints 4 decimals)" \
  "[[ '$loss' =~ \$num ]] && [[ '$want' =~ \$num ]] && awk 'BEGIN { d = $loss - $want; exit !(d * d <= 1e-8) }'"
total=$("$lrc" inspect "${M[@]}" --params | awk '/^total/ {print $2}')
check "the demo's parameter count is inspect's ($total)" "[ -n '$params' ] && [ '$params' = '$total' ]"
summary
