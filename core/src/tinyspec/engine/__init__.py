"""The lowering pipeline of seed 001, one module per stage in order: callify, rangeify, expand, isel, linearize, memplan;
`realize` drives it and runs the kernels."""
