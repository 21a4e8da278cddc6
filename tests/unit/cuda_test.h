/* cuda_test.h — what test_cuda_ops and test_cuda_optim share: the device
 * they run on, or exit status 77 (ctest's skip) with the reason where this
 * machine has none (a failure, exit 1, when CI=true); every buffer with a
 * guard region after it. */
#ifndef LRC_TEST_CUDA_TEST_H
#define LRC_TEST_CUDA_TEST_H

#include "runtime/lrc_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* arch = "sm_XX" of device 0; LRC_CUDA_CHECK=1 for every run after */
static void cuda_test_device(char *arch, size_t n)
{
    lrc_cuda_device dev;
    char why[256];
    if (lrc_cuda_probe(&dev, why, sizeof why)) {
        /* CI always has the emulator (tests/cuemu) on the library path, so
         * a missing device there is a broken set-up, not a machine without
         * a GPU: it fails instead of counting as a pass */
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            printf("FAIL: no cuda device to run on, and CI=true (where the emulator always is): %s\n", why);
            exit(1);
        }
        printf("skip: no cuda device to run on: %s\n", why);
        exit(77);
    }
    snprintf(arch, n, "sm_%d", dev.sm);
    setenv("LRC_CUDA_CHECK", "1", 1); /* a guard region after every buffer, checked after every launch */
    printf("on %s (%s), guard regions after every buffer\n", dev.name, arch);
}

#endif
