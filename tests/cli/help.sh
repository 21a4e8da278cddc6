#!/usr/bin/env bash
# help.sh — every command lrc has lists the same options in three places:
# its --help synopsis, docs/cli.md's synopsis block, and its parser.
#
#   tests/cli/help.sh LRC [docs/cli.md]
#
# The commands come from `lrc --help` (printed from the dispatcher's own
# table), so a new command without docs fails here. For each command:
#   - `lrc CMD --help` exits 0 with nothing on stderr (lrc itself checks
#     there that its --help synopsis and its getopt table hold the same
#     options, and says so on stderr when they do not);
#   - the options of the help synopsis (the lines before its first blank line)
#     and of docs/cli.md's `lrc CMD` lines are the same set, and each takes a
#     value in both or in neither;
#   - the parser takes every option the help lists, as the help writes it:
#     `lrc CMD --opt=VALUE --help` (or `-o VALUE`, or `--flag`) must reach
#     --help (as plain --help does) or fail on that option's value (exit 2,
#     one line naming the option); "unknown option" or any other outcome fails.
# Prints one line per mismatch naming the command and the option, then a
# summary; exits 0 only when nothing failed.
set -u
lrc=${1:?usage: help.sh LRC [docs/cli.md]}
docs=${2:-$(cd "$(dirname "$0")/../.." && pwd)/docs/cli.md}
[ -r "$docs" ] || { echo "help.sh: cannot read $docs"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() {
    echo "FAIL $*"
    failed=$((failed + 1))
}

# The options of the synopsis on stdin, one a line, with the value's name
# after it when the option takes one ("--seq T", "-o PKG", "--flip"). An
# option is a '-' at a line's start or after a space, '[' or '|', then a
# letter; the same rule as frontend/cli/cli_args.c's synopsis_option.
options() {
    grep -oE '(^|[][ |])--?[A-Za-z][A-Za-z0-9-]*( [^][ |-][^][ ]*)?' | sed -E 's/^[][ |]//' | sort -u
}
# docs/cli.md's synopsis (its first ``` block): the lines of `lrc CMD`, or
# (no argument) the commands it has. A line that starts with a space goes on
# the entry above it.
docs_synopsis() {
    awk -v cmd="${1-}" '/^```/ { n++; next }
        n == 1 { if ($0 ~ /^lrc /) cur = $2
                 if (cmd == "" && $0 ~ /^lrc /) print $2
                 else if (cmd != "" && cur == cmd) print }' "$docs"
}

if ! "$lrc" --help >"$tmp/usage" 2>"$tmp/err"; then
    echo "FAIL lrc --help exited non-zero: $(head -c 300 "$tmp/err")"
    exit 1
fi
cmds=$(awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }' "$tmp/usage")
[ -n "$cmds" ] || { echo "FAIL lrc --help lists no commands (no 'commands:' section)"; exit 1; }
# The command table's two columns: COMMAND [ARG], at least two spaces, then
# the description, which starts at the same column on every line (a column
# too narrow runs them together: "analyze CHECKPOINTwhat the ...").
awk '/^commands:/ { on = 1; next } on && /^$/ { exit } on' "$tmp/usage" >"$tmp/table"
while IFS= read -r line; do
    [[ $line =~ ^\ \ [a-z][a-z-]*(\ [A-Z][A-Z_.|]*)?\ \ +[a-z] ]] ||
        fail "lrc --help: '$line' is not COMMAND [ARG], two spaces, a description"
done <"$tmp/table"
cols=$(grep -E '^  [a-z][a-z-]*( [A-Z][A-Z_.|]*)?  +[a-z]' "$tmp/table" |
    sed -E 's/^(  [a-z][a-z-]*( [A-Z][A-Z_.|]*)? +).*/\1/' | awk '{ print length($0) }' | sort -u)
[ "$(wc -l <<<"$cols")" -eq 1 ] || fail "lrc --help: the descriptions start at columns $(tr '\n' ' ' <<<"$cols")(not aligned)"
# Every model of models/ is a built-in model lrc --help names.
models_dir=$(cd "$(dirname "$0")/../.." && pwd)/models
builtin=$(grep -E 'built-in model' "$tmp/usage")
for f in "$models_dir"/*.lua; do
    m=$(basename "$f" .lua)
    grep -qE "(^|[^a-z0-9_-])$m([^a-z0-9_-]|$)" <<<"${builtin#*built-in model}" || fail "lrc --help does not name the built-in model $m (models/$m.lua): '$builtin'"
    "$lrc" inspect "$m" --params >/dev/null 2>"$tmp/err" || fail "lrc inspect $m: not a built-in model: $(head -c 200 "$tmp/err")"
done
while read -r c; do
    grep -qx -- "$c" <<<"$cmds" || fail "$c: docs/cli.md's synopsis has 'lrc $c', which lrc --help does not list"
done < <(docs_synopsis | sort -u)

n_cmds=0 n_opts=0
for cmd in $cmds; do
    n_cmds=$((n_cmds + 1))
    "$lrc" "$cmd" --help >"$tmp/help" 2>"$tmp/help_err"
    rc=$?
    if [ $rc -ne 0 ] || [ -s "$tmp/help_err" ]; then
        fail "$cmd: lrc $cmd --help exited $rc, stderr: $(tr '\n' ';' <"$tmp/help_err" | head -c 400)"
    fi
    head -n 1 "$tmp/help" | grep -qE "^usage: lrc $cmd( |$)" || fail "$cmd: lrc $cmd --help does not start with 'usage: lrc $cmd'"
    sed '/^$/q' "$tmp/help" | options >"$tmp/help_opts"
    docs_synopsis "$cmd" | options >"$tmp/docs_opts"
    if ! docs_synopsis "$cmd" | grep -q .; then
        fail "$cmd: docs/cli.md's synopsis has no 'lrc $cmd' line"
        continue
    fi
    cut -d' ' -f1 "$tmp/help_opts" | sort -u >"$tmp/help_names"
    cut -d' ' -f1 "$tmp/docs_opts" | sort -u >"$tmp/docs_names"
    while read -r o; do fail "$cmd: $o is in lrc $cmd --help but not in docs/cli.md"; done < <(comm -23 "$tmp/help_names" "$tmp/docs_names")
    while read -r o; do fail "$cmd: $o is in docs/cli.md but not in lrc $cmd --help"; done < <(comm -13 "$tmp/help_names" "$tmp/docs_names")
    while read -r o; do
        h=$(grep -c -- "^$o " "$tmp/help_opts") d=$(grep -c -- "^$o " "$tmp/docs_opts")
        if [ "$h" -gt 0 ] && [ "$d" -eq 0 ]; then fail "$cmd: $o takes a value in lrc $cmd --help but none in docs/cli.md"; fi
        if [ "$h" -eq 0 ] && [ "$d" -gt 0 ]; then fail "$cmd: $o takes a value in docs/cli.md but none in lrc $cmd --help"; fi
    done < <(comm -12 "$tmp/help_names" "$tmp/docs_names")

    # The parser side: each option as the help writes it, then --help.
    while read -r name value; do
        n_opts=$((n_opts + 1))
        case $name in
        --*) args=("$name${value:+=$value}") ;; # '=': a flag given a value is refused
        *) args=("$name" ${value:+"$value"}) ;;
        esac
        "$lrc" "$cmd" "${args[@]}" --help >"$tmp/out" 2>"$tmp/err"
        prc=$?
        # Reaching --help: what plain --help does (exit 0 unless reported above).
        [ $prc -eq $rc ] && cmp -s "$tmp/out" "$tmp/help" && cmp -s "$tmp/err" "$tmp/help_err" && continue
        # Refusing the value (a metavariable such as T is no integer) still
        # shows that the parser took the option.
        if [ $prc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$name " "$tmp/err" &&
            ! grep -qE 'unknown option|needs a value|unexpected argument' "$tmp/err"; then
            continue
        fi
        fail "$cmd: the parser does not take $name as lrc $cmd --help writes it (lrc $cmd ${args[*]} --help: exit $prc, stderr: $(tr '\n' ';' <"$tmp/err" | head -c 300))"
    done <"$tmp/help_opts"
done
echo "cli_help: $n_cmds commands, $n_opts options passed to the parser, $failed failed"
[ $failed -eq 0 ]
