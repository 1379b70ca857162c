"""tinyspec's CUDA devices: kernels rendered as CUDA C and compiled by NVRTC (PyPI's nvidia-cuda-nvrtc, through ctypes).

CUDA runs them on an NVIDIA GPU through pycuda (the `runtime` extra); CUDA_CHECK, for machines without one, compiles every
kernel for sm_80 and sm_90 and runs it on tinyspec's numpy interpreter. Importing this package imports nothing heavy."""
