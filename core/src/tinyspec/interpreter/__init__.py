"""The built-in PYTHON device: runs LINEAR programs with numpy, vectorised over the iteration space. The oracle for every other device."""
