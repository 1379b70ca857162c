"""tinyspec's Metal devices: kernels rendered in Metal Shading Language.

METAL runs them on a Mac's GPU through PyObjC's Metal framework (the `runtime` extra); METAL_CHECK, for any other machine,
checks every kernel with the host C++ compiler against a stand-in metal_stdlib and runs it on tinyspec's numpy
interpreter. Importing this package imports nothing heavy."""
