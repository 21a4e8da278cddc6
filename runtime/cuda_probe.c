/* cuda_probe.c — whether this machine can run CUDA packages: the NVIDIA
 * driver (libcuda.so.1) and cuBLAS are loaded with dlopen, never linked, so
 * one lrc binary runs with or without a GPU and can say which is missing. */
#include "cuda_dl.h"
#include "lrc_runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *lrc_cuda_open_cublas(void)
{
    static const char *names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    return lib;
}

int lrc_cuda_probe(lrc_cuda_device *dev, char *why, size_t n)
{
    memset(dev, 0, sizeof *dev);
    void *cu = dlopen(LRC_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!cu) {
        snprintf(why, n, "no NVIDIA driver (" LRC_CUDA_DRIVER_LIB " not found)");
        return -1;
    }
    int (*init)(unsigned) = NULL, (*count)(int *) = NULL, (*get)(int *, int) = NULL;
    int (*name)(char *, int, int) = NULL, (*attr)(int *, int, int) = NULL, (*ename)(int, const char **) = NULL;
    int (*mem)(size_t *, int) = NULL, (*version)(int *) = NULL;
    *(void **)&init = dlsym(cu, "cuInit");
    *(void **)&version = dlsym(cu, "cuDriverGetVersion");
    *(void **)&count = dlsym(cu, "cuDeviceGetCount");
    *(void **)&get = dlsym(cu, "cuDeviceGet");
    *(void **)&name = dlsym(cu, "cuDeviceGetName");
    *(void **)&attr = dlsym(cu, "cuDeviceGetAttribute");
    *(void **)&ename = dlsym(cu, "cuGetErrorName");
    *(void **)&mem = dlsym(cu, "cuDeviceTotalMem_v2");
    int rc = -1, r, c = 0, d = 0, v = 0;
    const char *en = "?";
    if (!init || !count || !get || !name || !attr || !mem || !version) {
        snprintf(why, n, "the NVIDIA driver's libcuda.so.1 lacks the driver API (too old a driver?)");
    } else if ((r = init(0))) {
        if (ename) ename(r, &en);
        snprintf(why, n, "the NVIDIA driver does not start (cuInit: %s)", en);
    } else if (version(&v) || v < LRC_CUDA_MIN_DRIVER) {
        snprintf(why, n,
                 "the NVIDIA driver supports CUDA %d.%d, and lrc's kernels (CUDA %d.%d's NVRTC) and cuBLAS need %d.%d or newer: "
                 "install a newer NVIDIA driver (the 580 series or later)",
                 v / 1000, v % 1000 / 10, LRC_CUDA_MIN_DRIVER / 1000, LRC_CUDA_MIN_DRIVER % 1000 / 10, LRC_CUDA_MIN_DRIVER / 1000,
                 LRC_CUDA_MIN_DRIVER % 1000 / 10);
    } else if ((r = count(&c)) || c == 0) {
        snprintf(why, n, "no CUDA device");
    } else if (!get(&d, 0) && !name(dev->name, (int)sizeof dev->name, d)) {
        int major = 0, minor = 0;
        attr(&major, 75, d); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
        attr(&minor, 76, d); /* ..._MINOR */
        attr(&dev->sms, 16, d); /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
        size_t bytes = 0;
        mem(&bytes, d);
        dev->sm = 10 * major + minor;
        dev->memory_bytes = (int64_t)bytes;
        dev->count = c;
        void *blas = lrc_cuda_open_cublas();
        if (!blas) snprintf(why, n, "cuBLAS not found (libcublas.so: install the CUDA toolkit's libraries)");
        else {
            dlclose(blas);
            rc = 0;
        }
    } else {
        snprintf(why, n, "cannot query CUDA device 0");
    }
    dlclose(cu);
    return rc;
}
