/* cuda_dl.h — the NVIDIA libraries runtime/ loads with dlopen, named once
 * for the probe (cuda_probe.c) and the executor (cuda_exec.c); internal. */
#ifndef LRC_CUDA_DL_H
#define LRC_CUDA_DL_H

#define LRC_CUDA_DRIVER_LIB "libcuda.so.1"
/* The CUDA version the driver must support (cuDriverGetVersion's 1000 major
 * + 10 minor): the kernels' PTX comes from CUDA 13's NVRTC and the GEMMs
 * from libcublas.so.13, which an older driver cannot run */
#define LRC_CUDA_MIN_DRIVER 13000
/* cuBLAS of CUDA 13 or 12, else whatever libcublas.so is; NULL if none. */
void *lrc_cuda_open_cublas(void);

#endif
