"""A model's kernels for the browser: `export(fn, inputs, out_dir)` runs `fn` on WEBGPU Tensors while recording the
kernels it launches (`engine.realize.capture`, what TinyJit records) and writes what a web page needs to run them again:

    model.json           the manifest: buffers (bytes, dtype, role), kernels (WGSL file, dispatch, buffer bindings),
                         the steps in order, which buffers are the inputs and the outputs, the features and limits needed
    kernels/NN_name.wgsl one compute shader per distinct kernel, as the WEBGPU renderer wrote it
    weights.safetensors  every buffer the kernels read before writing it (the weights), named after `names` where given
    inputs.safetensors   the example inputs, and `expected.safetensors` the outputs they gave, for a page to check itself
    runner.js            `loadModel(url)` -> `{run(inputs)}`: WebGPU in the browser, no dependencies
    index.html           a page that runs the model on the example inputs and shows the outputs beside the expected ones

Every launch's grid is fixed in the manifest (as `dispatch_grid` folds it), so the runner does no arithmetic on it.
`run_exported` is the same runner in Python over wgpu, which checks an export where no browser with WebGPU is at hand.
Symbolic shapes are not exported: a kernel taking variables is refused.
"""
from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tinyspec.device import Buffer, Device
from tinyspec.dtype import DType, dtypes
from tinyspec.engine import realize as engine
from tinyspec.tensor import Tensor
from tinyspec.uop.ops import Ops

from tinyspec_webgpu.renderer import WGSLRenderer, dispatch_grid

FORMAT = "tinyspec-webgpu-export 1"
WEB = Path(__file__).parent / "web"
SAFETENSORS = {dtypes.bool: "BOOL", dtypes.int8: "I8", dtypes.uint8: "U8", dtypes.int16: "I16", dtypes.uint16: "U16", dtypes.int32: "I32",
               dtypes.uint32: "U32", dtypes.int64: "I64", dtypes.uint64: "U64", dtypes.float16: "F16", dtypes.float32: "F32"}
NUMPY = {v: np.dtype(k.np) for k, v in SAFETENSORS.items()}

def write_safetensors(path: Path, arrays: dict[str, tuple[np.ndarray, DType]]) -> None:
  """`arrays` (name -> (array, dtype)) as a safetensors file: a little-endian u64 header length, the JSON header, the data."""
  header, offset, blobs = {}, 0, []
  for name, (arr, dt) in arrays.items():
    data = np.ascontiguousarray(arr).tobytes()
    header[name] = {"dtype": SAFETENSORS[dt], "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
  text = json.dumps(header).encode()
  text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
  path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))

def read_safetensors(path: Path) -> dict[str, np.ndarray]:
  raw = path.read_bytes()
  n = struct.unpack("<Q", raw[:8])[0]
  header = json.loads(raw[8:8 + n])
  return {k: np.frombuffer(raw[8 + n + a:8 + n + b], NUMPY[v["dtype"]]).reshape(v["shape"])
          for k, v in header.items() if k != "__metadata__" for a, b in [v["data_offsets"]]}

def _listed(out) -> list[Tensor]:
  return [out] if isinstance(out, Tensor) else list(out)

def export(fn: Callable[..., Tensor | Sequence[Tensor]], inputs: Sequence[Tensor], out_dir: str | Path,
           names: dict[str, Tensor] | None = None) -> Path:
  """Run `fn(*inputs)` (WEBGPU Tensors in, a Tensor or a sequence of them out) and write its kernels, weights and a web
  runner to `out_dir` (see the module docstring). `names` (a state dict) names the weights and realizes them first: a
  weight still lazy (a fresh model's random initialization) would otherwise be computed again on every run. Returns `out_dir`."""
  device = inputs[0].device
  if not isinstance(Device[device].renderer, WGSLRenderer): raise ValueError(f"export needs WEBGPU inputs; these are on {device}")
  Tensor.realize(*inputs, *(names or {}).values())  # lazy weights (a fresh model's random init) become buffers to export
  Tensor.realize(*_listed(fn(*inputs)))  # the first call realizes lazy weights and compiles: the capture holds the model alone
  with engine.capture() as recording:
    outs = _listed(fn(*inputs))
    Tensor.realize(*outs)
  index: dict[int, int] = {}
  buffers: list[Buffer] = []
  def number(b: Buffer) -> int:
    if id(b) not in index: index[id(b)], _ = len(buffers), buffers.append(b)
    return index[id(b)]
  input_ids = [number(engine.buffer_of(t.uop)) for t in inputs]
  written, weights, kernels, sources, steps = set(input_ids), [], [], {}, []
  for schedule_steps, bufs, var_vals in recording:
    if var_vals: raise NotImplementedError(f"export: kernels with symbolic shapes ({sorted(var_vals)}) are not exported")
    for step in schedule_steps:
      used = [number(bufs[i]) for i in step.buffers]
      writes = 1 if isinstance(step, engine.CopyStep) else step.outputs  # the buffers a step writes come first
      if isinstance(step, engine.CopyStep):
        if bufs[step.buffers[1]].device != bufs[step.buffers[0]].device: raise NotImplementedError("export: a copy between devices")
        steps.append({"copy": used})
      elif not step.empty:
        k = step.kernel
        if k.variables: raise NotImplementedError(f"export: kernel {k.name} takes variables {k.variables} (symbolic shapes)")
        if k.source not in sources:
          sources[k.source] = len(kernels)
          kernels.append({"name": k.name, "file": f"kernels/{len(kernels):02d}_{k.name}.wgsl"})
        grid = dispatch_grid(tuple(k.global_size or ()), Device[device].renderer.dispatch_max)
        steps.append({"kernel": sources[k.source], "dispatch": list(grid), "buffers": used})
      else: continue
      weights += [b for b in used[writes:] if b not in written and b not in weights]  # read before anything wrote it
      written.update(used[:writes])
  output_ids = [number(engine.buffer_of(t.uop)) for t in outs]
  named = {id(engine.buffer_of(t.uop)): (name, t.shape) for name, t in (names or {}).items() if t.uop.op is Ops.BUFFER}
  weight_names = {i: named.get(id(buffers[i]), (f"buffer{i}",))[0] for i in weights}
  def weight(i: int) -> np.ndarray: return buffers[i].numpy().reshape(named.get(id(buffers[i]), ("", (-1,)))[1])  # a named one in its shape
  role = {**{i: "weight" for i in weights}, **{i: "input" for i in input_ids}, **{i: "output" for i in output_ids}}
  out = Path(out_dir)
  (out / "kernels").mkdir(parents=True, exist_ok=True)
  for src, k in sources.items(): (out / kernels[k]["file"]).write_text(src)
  manifest = {
    "format": FORMAT,
    "features": ["shader-f16"] if any("enable f16;" in src for src in sources) else [],
    "limits": {"maxStorageBuffersPerShaderStage": max([len(s["buffers"]) for s in steps if "kernel" in s], default=1)},
    "buffers": [{"bytes": max(4, -(-b.nbytes // 4) * 4), "dtype": b.dtype.name, "role": role.get(i, "intermediate"),
                 **({"name": weight_names[i]} if i in weight_names else {})} for i, b in enumerate(buffers)],
    "kernels": kernels, "steps": steps,
    "inputs": [{"buffer": i, "dtype": t.dtype.name, "shape": list(t.shape)} for i, t in zip(input_ids, inputs)],
    "outputs": [{"buffer": i, "dtype": t.dtype.name, "shape": list(t.shape)} for i, t in zip(output_ids, outs)],
  }
  (out / "model.json").write_text(json.dumps(manifest, indent=1))
  write_safetensors(out / "weights.safetensors", {weight_names[i]: (weight(i), buffers[i].dtype) for i in weights})
  write_safetensors(out / "inputs.safetensors", {f"input{j}": (t.numpy(), t.dtype) for j, t in enumerate(inputs)})
  write_safetensors(out / "expected.safetensors", {f"output{j}": (t.numpy(), t.dtype) for j, t in enumerate(outs)})
  for name in ("runner.js", "index.html"): shutil.copy(WEB / name, out / name)
  return out

def run_exported(path: str | Path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
  """Run an export with wgpu, as runner.js runs it in a browser: read the manifest, load the weights, build each kernel's
  pipeline from its WGSL file, and record every step into one command encoder. Touches no tinyspec device."""
  import wgpu
  path = Path(path)
  manifest = json.loads((path / "model.json").read_text())
  if manifest["format"] != FORMAT: raise ValueError(f"{path}: format {manifest['format']!r}, expected {FORMAT!r}")
  adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
  if missing := [f for f in manifest["features"] if f not in adapter.features]: raise RuntimeError(f"the adapter lacks {missing}")
  limits = {"max-storage-buffers-per-shader-stage": max(manifest["limits"]["maxStorageBuffersPerShaderStage"], 8)}
  device = adapter.request_device_sync(required_features=manifest["features"], required_limits=limits)
  usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
  bufs = [device.create_buffer(size=b["bytes"], usage=usage) for b in manifest["buffers"]]
  def write(i: int, arr: np.ndarray) -> None:
    data = np.ascontiguousarray(arr).tobytes()
    device.queue.write_buffer(bufs[i], 0, data + bytes(-len(data) % 4))
  weights = read_safetensors(path / "weights.safetensors")
  for i, b in enumerate(manifest["buffers"]):
    if b["role"] == "weight": write(i, weights[b["name"]])
  for spec, arr in zip(manifest["inputs"], inputs): write(spec["buffer"], np.asarray(arr, dtypes.from_name(spec["dtype"]).np))
  pipelines = []
  for k in manifest["kernels"]:
    module = device.create_shader_module(code=(path / k["file"]).read_text())
    pipelines.append(device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": k["name"]}))
  encoder = device.create_command_encoder()
  for step in manifest["steps"]:
    if "copy" in step:
      dst, src = step["copy"]
      encoder.copy_buffer_to_buffer(bufs[src], 0, bufs[dst], 0, manifest["buffers"][dst]["bytes"])
      continue
    pipeline = pipelines[step["kernel"]]
    entries = [{"binding": j, "resource": {"buffer": bufs[i], "offset": 0, "size": bufs[i].size}} for j, i in enumerate(step["buffers"])]
    compute_pass = encoder.begin_compute_pass()
    compute_pass.set_pipeline(pipeline)
    compute_pass.set_bind_group(0, device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=entries))
    compute_pass.dispatch_workgroups(*step["dispatch"])
    compute_pass.end()
  device.queue.submit([encoder.finish()])
  out = []
  for spec in manifest["outputs"]:
    dt = dtypes.from_name(spec["dtype"]).np
    raw = device.queue.read_buffer(bufs[spec["buffer"]])
    out.append(np.frombuffer(raw, dt)[:int(np.prod(spec["shape"]))].reshape(spec["shape"]).copy())
  return out

def export_demo(out_dir: str | Path, hidden: int = 64, points: int = 256, seed: int = 0) -> Path:
  """The demo's MLP (`tinyspec demo`, two spirals), freshly initialized from `seed`, as a page: class probabilities of
  `points` spiral points."""
  from tinyspec.demo import MLP, spirals
  from tinyspec.nn.state import get_state_dict
  Tensor.manual_seed(seed)
  model = MLP(hidden, device="WEBGPU")
  x = Tensor(spirals(points, np.random.default_rng(seed))[0], device="WEBGPU")
  return export(lambda x: model(x).softmax(-1), [x], out_dir, names=get_state_dict(model))

if __name__ == "__main__":
  import sys
  print(f"wrote {export_demo(sys.argv[1] if len(sys.argv) > 1 else 'webgpu-demo')}: serve it (python -m http.server) and open index.html")
