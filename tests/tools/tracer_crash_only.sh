#!/bin/bash
# tracer_crash_only.sh BUILD_DIR — exit 0 when every test of ctest's last run
# that failed has LeakSanitizer's fatal tracer error in its own output
# (Testing/Temporary/LastTest.log keeps each test's output between its
# "N/M Test: NAME" line and its "NAME" end time line), else 1, naming the
# first test that failed otherwise. test.sh runs the failed tests a second
# time only then: a real failure beside one tracer crash gets no retry.
# LeakSanitizer prints its fatal error and then two HINT lines, and nothing
# else prints the last of them: a test that keeps only the last line of an
# inner run's stderr (tests/cuemu/train.sh) still shows which it was.
set -u
tmp=$1/Testing/Temporary
failed=$(cut -d: -f2- "$tmp/LastTestsFailed.log" 2>/dev/null)
[ -n "$failed" ] || { echo "tracer_crash_only: no failed test listed in $tmp/LastTestsFailed.log"; exit 1; }
while IFS= read -r t; do
  awk -v t="$t" '$0 ~ /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, "Test: ") + 6) == t { on = 1 }
                 on && (index($0, "LeakSanitizer has encountered a fatal error") ||
                        index($0, "HINT: LeakSanitizer does not work under ptrace")) { found = 1 }
                 on && index($0, "\"" t "\" end time:") == 1 { on = 0 }
                 END { exit !found }' "$tmp/LastTest.log" ||
    { echo "tracer_crash_only: $t failed, and not through LeakSanitizer's tracer"; exit 1; }
done <<<"$failed"
