"""tinyspec's WEBGPU device: kernels as WGSL compute shaders, run through wgpu (wgpu-native) on whatever GPU API the
machine has: Vulkan, Metal, D3D12, or Vulkan's software driver lavapipe where there is no GPU. `export.py` writes a
model's kernels, a JavaScript runner and its weights for a browser. Importing this package imports nothing heavy."""
__version__ = "0.1.0"
