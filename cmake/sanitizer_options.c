/* sanitizer_options.c — linked into every executable of a sanitizer build
 * (LRC_SANITIZE, CMakeLists.txt); ASAN_OPTIONS in the environment still
 * overrides it.
 *
 * intercept_tls_get_addr=0: GCC 12's libasan records a dlopen'ed library's
 * dynamic TLS block through its __tls_get_addr interceptor, and for NVRTC 13
 * it records a bogus range (`LSAN_OPTIONS=verbosity=1:log_threads=1` prints
 * "DTLS 7 at 0x000000000e5f-0x002000001f61"). LeakSanitizer's check at exit
 * scans that range and its tracer dies ("Tracer caught signal 11" in
 * __lsan::ScanRangeForPointers) in any process that loaded NVRTC, depending
 * only on the memory layout. Without the interceptor the dynamic TLS blocks
 * are not scanned as roots: a leak check that can only report more, never
 * hide one (a block reachable only from a dlopen'ed library's TLS would be
 * reported). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
