"""The programs in examples/ run (a few steps, small sizes, on the PYTHON device) and succeed: their own checks pass."""
import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
  spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module

def test_gpt_trains_saves_reloads_and_samples(tmp_path, capsys):
  gpt = load("gpt")
  checkpoint = tmp_path / "gpt.safetensors"
  args = ["--steps", "3", "--dim", "16", "--heads", "2", "--layers", "1", "--context", "16", "--batch", "2", "--sample", "5",
          "--device", "PYTHON", "--checkpoint", str(checkpoint)]
  assert gpt.main(args) == 0  # finite losses, and the reloaded checkpoint gives the trained model's logits
  out = capsys.readouterr().out
  assert checkpoint.exists() and "gives the same logits" in out and "sample:" in out
  assert len(gpt.corpus()) > 10_000  # it learns from the docs it carries

def test_kv_cache_decodes_with_one_compile():
  assert load("kv_cache").main(["--steps", "6", "--device", "PYTHON"]) == 0

def test_cnn_trains_and_reports_its_accuracy(capsys):
  assert load("cnn").main(["--steps", "4", "--batch", "8", "--device", "PYTHON"]) == 0
  assert "held-out accuracy" in capsys.readouterr().out
