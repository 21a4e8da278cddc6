/* sanitizer_options.c — linked into every executable of a sanitizer build
 * (LRC_SANITIZE, CMakeLists.txt); ASAN_OPTIONS in the environment still
 * overrides it.
 *
 * intercept_tls_get_addr=0: GCC 12's libasan records each dlopen'ed
 * library's dynamic TLS block through its __tls_get_addr interceptor, and
 * where the block's address is 16 mod 4096 it takes the 16 bytes before it
 * for a glibc 2.19 header and reads a start and a size from whatever lies
 * there. For NVRTC 13 that gave "DTLS 7 at 0x000000000e5f-0x002000001f61"
 * (LSAN_OPTIONS=verbosity=1:log_threads=1), and LeakSanitizer's check at
 * exit died scanning it ("Tracer caught signal 11" in
 * __lsan::ScanRangeForPointers). The allocator's addresses follow the
 * program's allocations, so a given build and test crashed every time, or
 * never: CI's cuda_train, cuda_vit_layerrope_odd_f32 and
 * cuda_hf_qwen2_tied_sm80 failed twice in a row. Without the interceptor no
 * dynamic TLS is scanned as roots, which can only report more leaks, never
 * hide one (nothing of lrc's is reachable only from another library's TLS). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
