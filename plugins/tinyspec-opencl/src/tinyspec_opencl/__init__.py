"""tinyspec's OPENCL device: kernels as OpenCL C, built and run through pyopencl on any OpenCL platform (PoCL on a machine
without a GPU). Importing this package imports nothing heavy; pyopencl is loaded when the device is probed or opened."""
