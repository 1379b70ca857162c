"""tinyspec's CPU device: LLVM IR compiled by llvmlite for the host CPU, JIT-loaded and called through ctypes.

Importing this package imports nothing heavy; llvmlite is loaded when the device is first probed or opened."""
