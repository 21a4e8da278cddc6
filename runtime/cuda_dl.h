/* cuda_dl.h — the NVIDIA libraries runtime/ loads with dlopen, named once
 * for the probe (cuda_probe.c) and the executor (cuda_exec.c); internal. */
#ifndef LRC_CUDA_DL_H
#define LRC_CUDA_DL_H

#define LRC_CUDA_DRIVER_LIB "libcuda.so.1"
/* cuBLAS of CUDA 13 or 12, else whatever libcublas.so is; NULL if none. */
void *lrc_cuda_open_cublas(void);

#endif
