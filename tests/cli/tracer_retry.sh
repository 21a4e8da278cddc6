#!/bin/bash
# tracer_retry.sh — test.sh's rule for a second run: tests/tools/tracer_crash_only.sh
# on real ctest runs of a scratch project whose tests fail with and without
# LeakSanitizer's tracer message in their own output. A second run is
# allowed only when every failed test's own output has the message.
here=$(cd "$(dirname "$0")/.." && pwd)
source "$(dirname "$0")/../tools/check.sh"
msg='==1==LeakSanitizer has encountered a fatal error.'
mkdir "$dir/src"
cat >"$dir/src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.13)
project(tracer NONE)
enable_testing()
add_test(NAME tracer_crash COMMAND sh -c "echo '$msg'; exit 1")
add_test(NAME hint_kept COMMAND sh -c "echo 'FAIL: vit training on cuda: ==1==HINT: LeakSanitizer does not work under ptrace (strace, gdb, etc)'; exit 1")
add_test(NAME real_failure COMMAND sh -c "echo 'FAIL something'; exit 1")
add_test(NAME passes_with_message COMMAND sh -c "echo '$msg'; exit 0")
CM
cmake -S "$dir/src" -B "$dir/b" >/dev/null || exit 1
run() { ctest --test-dir "$dir/b" "$@" >/dev/null 2>&1; "$here/tools/tracer_crash_only.sh" "$dir/b" >"$dir/out.txt"; }
run -R '^tracer_crash$'
check "the tracer's crash alone: a second run" "[ $? = 0 ]"
run -R '^(tracer_crash|hint_kept)$'
check "the tracer's last HINT line, all a test kept of an inner run: a second run" "[ $? = 0 ]"
run -R '^(tracer_crash|real_failure)$'
check "a real failure beside a tracer crash: no second run" "[ $? = 1 ] && grep -q 'real_failure failed' '$dir/out.txt'"
run -R '^(real_failure|passes_with_message)$'
check "the message in another test's output: no second run" "[ $? = 1 ] && grep -q 'real_failure failed' '$dir/out.txt'"
# test.sh's second run: ctest numbers a filtered run's tests among themselves,
# so --rerun-failed must get the run's -E again, or it runs other tests
cat >"$dir/src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.13)
project(rerun NONE)
enable_testing()
add_test(NAME excluded COMMAND true)
add_test(NAME neighbour COMMAND true)
add_test(NAME fails COMMAND false)
CM
cmake -S "$dir/src" -B "$dir/r" >/dev/null || exit 1
ctest --test-dir "$dir/r" -E excluded >/dev/null 2>&1
ctest --test-dir "$dir/r" --rerun-failed -E excluded >"$dir/rerun.txt" 2>&1
check "a filtered run's failure reruns with the same filter: the failed test" "grep -q 'Test #2: fails' '$dir/rerun.txt'"
rerun_line='--rerun-failed "${skip[@]}"'
check "test.sh reruns with the run's filter" 'grep -qF -- "$rerun_line" "$here/../test.sh"'
summary
