"""The export for browsers: the demo's MLP written out (WGSL kernels, manifest, safetensors weights, runner.js) and run
outside tinyspec, compared with the same model on the CPU device: through wgpu (`run_exported`) always, and as a web
page in headless Chromium where Chromium is installed and has WebGPU."""
import base64
import functools
import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from tinyspec import Tensor
from tinyspec.conformance import require_device
from tinyspec.demo import MLP
from tinyspec.nn.state import load_state_dict
from tinyspec_webgpu.export import export_demo, read_safetensors, run_exported


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
  require_device("WEBGPU", "pip install -e plugins/tinyspec-webgpu")
  return export_demo(tmp_path_factory.mktemp("export") / "demo")

def on_cpu(demo: Path) -> np.ndarray:
  """The exported model's outputs on its example inputs, computed by the CPU device from the exported weights."""
  model = MLP(64, device="CPU")
  load_state_dict(model, {k: Tensor(v, device="CPU") for k, v in read_safetensors(demo / "weights.safetensors").items()})
  return model(Tensor(read_safetensors(demo / "inputs.safetensors")["input0"], device="CPU")).softmax(-1).numpy()

def test_the_export_holds_the_model(demo):
  manifest = json.loads((demo / "model.json").read_text())
  weights = read_safetensors(demo / "weights.safetensors")
  assert sorted(weights) == sorted(f"layers.{i}.{p}" for i in range(3) for p in ("weight", "bias")) and weights["layers.1.weight"].shape == (64, 64)
  assert [b["role"] for b in manifest["buffers"]].count("weight") == 6 and manifest["outputs"][0]["shape"] == [256, 2]
  for k in manifest["kernels"]: assert f"fn {k['name']}(" in (demo / k["file"]).read_text()
  assert (demo / "runner.js").read_text().count("export async function loadModel") == 1

def test_the_exported_wgsl_runs_through_wgpu_as_on_the_cpu_device(demo):
  x = read_safetensors(demo / "inputs.safetensors")["input0"]
  got, = run_exported(demo, [x])
  np.testing.assert_allclose(got, on_cpu(demo), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(got, read_safetensors(demo / "expected.safetensors")["output0"])  # the same kernels as WEBGPU ran

class _Server(http.server.ThreadingHTTPServer):
  report: dict | None = None
  reported = threading.Event()

class _Handler(http.server.SimpleHTTPRequestHandler):
  def do_POST(self):  # index.html?report posts what it found here
    self.server.report = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
    self.server.reported.set()
    self.send_response(204)
    self.end_headers()
  def log_message(self, *args): pass

def chromium() -> str | None: return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

def test_the_page_runs_in_headless_chromium(demo, tmp_path):
  if (browser := chromium()) is None:
    pytest.skip("no Chromium here (Debian: apt-get install chromium); the export is checked through wgpu by the test above")
  server = _Server(("127.0.0.1", 0), functools.partial(_Handler, directory=str(demo)))
  threading.Thread(target=server.serve_forever, daemon=True).start()
  # Chromium's WebGPU (Dawn) runs on its own software Vulkan (SwiftShader) where there is no GPU: a second WGSL compiler (Tint)
  flags = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", f"--user-data-dir={tmp_path}", "--no-first-run"]
  proc = subprocess.Popen([browser, *flags, f"http://127.0.0.1:{server.server_address[1]}/index.html?report"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try: reported = server.reported.wait(120)
  finally:
    proc.kill()
    proc.wait()
    server.shutdown()
  assert reported, "the page reported nothing within 120 s"
  status = server.report["status"]
  if "no WebGPU" in status: pytest.skip(f"headless Chromium here has no WebGPU ({status}); the export is checked through wgpu instead")
  assert status.startswith("done"), status
  result = json.loads(server.report["result"])
  got = np.frombuffer(base64.b64decode(result["outputs"][0]), np.float32).reshape(256, 2)
  np.testing.assert_allclose(got, on_cpu(demo), rtol=1e-5, atol=1e-6)
