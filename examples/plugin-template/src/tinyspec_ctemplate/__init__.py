"""tinyspec-c-template: a tinyspec device plugin, written to be copied. Device CC runs kernels rendered as C99 and compiled
by the system's C compiler. plugin.py holds the hooks, renderer.py the C renderer, runtime.py the compiler and loader."""
__version__ = "0.1.0"
