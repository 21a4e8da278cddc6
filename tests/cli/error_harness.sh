# error_harness.sh — sourced by the bad-input tests (errors.sh, hf_errors.sh, size_bounds.sh):
# a scratch directory as the working directory, and t/ok, which run lrc
# and check what errors.sh's header says (exit status, one "lrc" line on
# stderr matching the patterns, nothing on stdout, no file left or changed).
# Needs LRC and VERBOSE set; counts into passed and failed.
#
# LRC_ERRORS_SHARD=K/N runs only the cases whose number (from 0, in file
# order) is K modulo N, so that ctest can run one script as N tests side by
# side; the setup between cases, and every ok control, runs in every shard.
T=$(mktemp -d "${TMPDIR:-/tmp}/lrc-errors.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
CAP=$(mktemp -d "${TMPDIR:-/tmp}/lrc-errors-cap.XXXXXX") || exit 2
trap 'rm -rf "$T" "$CAP"' EXIT
cd "$T" || exit 2

passed=0
failed=0
case_no=0
shard_k=0
shard_n=1
if [ -n "${LRC_ERRORS_SHARD:-}" ]; then
  if ! [[ $LRC_ERRORS_SHARD =~ ^([0-9]+)/([1-9][0-9]*)$ ]] || [ "${BASH_REMATCH[1]}" -ge "${BASH_REMATCH[2]}" ]; then
    echo "$(basename "$0"): LRC_ERRORS_SHARD=$LRC_ERRORS_SHARD: expected K/N with 0 <= K < N" >&2
    exit 2
  fi
  shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
fi

in_shard() { # counts the case, and says whether this shard runs it
  case_no=$((case_no + 1))
  [ $(((case_no - 1) % shard_n)) -eq "$shard_k" ]
}

snapshot() { # every path under the scratch directory, with the checksum of files
  find . -mindepth 1 -print0 | sort -z | while IFS= read -r -d '' p; do
    if [ -f "$p" ]; then printf '%s %s\n' "$p" "$(cksum <"$p")"; else printf '%s\n' "$p"; fi
  done
}

# t NAME STATUS PATTERN... -- ARGS...
#   Runs lrc ARGS; STATUS is the expected exit status (a regex, e.g. 1 or 2);
#   every PATTERN must match the stderr line. MEM_KB=N t ... caps lrc's
#   address space (ulimit -v) for cases that would otherwise eat the machine;
#   STDIN=FILE t ... gives lrc that file on stdin (else /dev/null).
t() {
  in_shard || return 0
  local name=$1 want=$2
  shift 2
  local pats=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do pats+=("$1"); shift; done
  shift
  local before after start=$SECONDS
  before=$(snapshot)
  ( # the subshell's own stderr takes bash's "Aborted"/"Segmentation fault" notices
    [ -n "${MEM_KB:-}" ] && ulimit -v "$MEM_KB"
    timeout 20 "$LRC" "$@" >"$CAP/stdout" 2>"$CAP/stderr" <"${STDIN:-/dev/null}"
  ) 2>/dev/null
  local rc=$? why=()
  local secs=$((SECONDS - start))
  if [ $rc -eq 124 ]; then
    why+=("hang (killed after 20 s)")
  elif [ $rc -gt 128 ]; then
    why+=("crash (exit status $rc = signal $((rc - 128)))")
  elif ! [[ $rc =~ ^($want)$ ]]; then
    why+=("exit status $rc, expected $want")
  fi
  local lines first=""
  lines=$(wc -l <"$CAP/stderr")
  [ -s "$CAP/stderr" ] && first=$(head -n 1 "$CAP/stderr")
  if [ ! -s "$CAP/stderr" ]; then
    why+=("nothing on stderr")
  else
    if [ "$lines" -ne 1 ] || [ "$(tail -c 1 "$CAP/stderr" | od -An -tx1 | tr -d ' ')" != 0a ]; then
      why+=("stderr is not exactly one line ($lines newlines)")
    fi
    [ -z "$first" ] && why+=("the stderr line is empty")
    [[ $first == lrc* ]] || why+=("stderr does not start with 'lrc'")
    local p
    for p in "${pats[@]}"; do
      grep -Eq -- "$p" "$CAP/stderr" || why+=("stderr lacks /$p/")
    done
  fi
  grep -qi traceback "$CAP/stdout" "$CAP/stderr" && why+=("traceback")
  [ -s "$CAP/stdout" ] && why+=("printed on stdout: $(head -c 120 "$CAP/stdout" | tr '\n' ' ')")
  after=$(snapshot)
  if [ "$before" != "$after" ]; then
    local d
    d=$(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | sed 's/^>/left or changed:/; s/^</was:/' |
      tr '\n' ' ')
    why+=("files changed: ${d:0:300}")
    # undo, so that one failure does not spill into the next cases
    comm -13 <(echo "$before" | sed 's/ .*//') <(echo "$after" | sed 's/ .*//') | while IFS= read -r p; do
      rm -rf -- "$p"
    done
  fi
  if [ ${#why[@]} -eq 0 ]; then
    passed=$((passed + 1))
    [ "$VERBOSE" != 0 ] && echo "ok   $name (${secs} s)"
    [ "$VERBOSE" = 2 ] && echo "     $(head -c 400 "$CAP/stderr")"
  else
    failed=$((failed + 1))
    local msg
    msg=$(head -c 400 "$CAP/stderr" | tr '\n' '|')
    local IFS=';'
    echo "FAIL $name: ${why[*]} | stderr: $msg"
  fi
  return 0
}

# ok NAME ARGS...: a control that must succeed (exit 0), so that the bad cases
# fail for the reason they are meant to.
ok() { # a control, run in every shard: later cases read what it writes
  local name=$1
  shift
  timeout 20 "$LRC" "$@" >"$CAP/stdout" 2>"$CAP/stderr" </dev/null
  local rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    [ "$VERBOSE" != 0 ] && echo "ok   $name (control)"
  else
    failed=$((failed + 1))
    echo "FAIL $name: control exited $rc | stderr: $(head -c 400 "$CAP/stderr" | tr '\n' '|')"
  fi
}

# cfg DIR PYTHON: a copy of $SRC (default $HF/llama_mha, a Hugging Face
# fixture) as DIR, its config.json edited by the Python statements (c is the
# config dict); the caller sets HF and PY
cfg() {
  rm -rf "$1"
  cp -r "${SRC:-$HF/llama_mha}" "$1"
  "$PY" - "$1/config.json" "$2" <<'PYEOF' || { echo "$(basename "$0"): editing $1 failed" >&2; exit 2; }
import json, sys
p, code = sys.argv[1], sys.argv[2]
c = json.load(open(p))
exec(code)
json.dump(c, open(p, "w"), indent=2)
PYEOF
}
