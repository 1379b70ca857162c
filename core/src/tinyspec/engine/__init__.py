"""The lowering pipeline of seed 001, one module per stage in order: callify, rangeify, optimize, expand, isel, linearize,
memplan; `realize` drives it (with `kernels` compiling one kernel, `run` running a schedule, `buffers` keeping memory)."""
