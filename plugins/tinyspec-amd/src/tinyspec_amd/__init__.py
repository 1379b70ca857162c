"""tinyspec's AMD devices: kernels as LLVM IR for amdgcn, built by llvmlite into code objects for AMD GPUs.

AMD runs them through HIP where ROCm and a GPU are present; AMD_CHECK builds every kernel for gfx1100, gfx942 and gfx1201
and runs it on core's numpy interpreter, so the whole toolchain is checked on any machine. Importing this package imports
nothing heavy; llvmlite is loaded when a device is probed or opened."""
