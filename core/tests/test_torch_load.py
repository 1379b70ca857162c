"""nn.state.torch_load: checkpoints written by torch.save (the zip format and the one before PyTorch 1.6) read back equal,
into a model that then computes PyTorch's outputs; and files that would run code, or whose tensors lie outside their
storage, refused."""
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.nn import BatchNorm2d, Conv2d, Linear
from tinyspec.nn.state import load_state_dict, torch_load

torch = pytest.importorskip("torch")


def torch_model():
  torch.manual_seed(0)
  return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.Linear(16, 2))

def assorted() -> dict:
  """Tensors of every dtype a checkpoint names by a storage class or by torch.<dtype>, views and empties."""
  base = torch.randn(4, 5)
  return {"bf16": torch.randn(3, 5).to(torch.bfloat16), "f16": torch.randn(3).half(), "f64": torch.randn(2, 2, dtype=torch.float64),
          "transposed": base.T, "view": base[1:3, ::2], "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
          "u16": torch.tensor([1, 65535], dtype=torch.uint16), "u64": torch.tensor([2 ** 63 + 5], dtype=torch.uint64),
          "i8": torch.tensor([-128, 7], dtype=torch.int8), "bool": torch.tensor([True, False, True]), "i64": torch.arange(5)}

def as_numpy(t):  # bfloat16 compared through float32 (numpy has no bfloat16)
  return t.float().numpy() if t.dtype in (torch.bfloat16, dtypes.bfloat16) else t.numpy()

@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_checkpoint_reads_back_equal(tmp_path, legacy):
  sd = {**torch_model().state_dict(), **assorted()}
  path = tmp_path / "ck.pt"
  torch.save({"model": sd, "epoch": 3, "hp": {"lr": 0.1, "betas": (0.9, 0.99)}}, path, _use_new_zipfile_serialization=not legacy)
  out = torch_load(path)
  assert out["epoch"] == 3 and out["hp"] == {"lr": 0.1, "betas": (0.9, 0.99)}
  assert list(out["model"]) == list(sd)
  for k, v in sd.items():
    got = out["model"][k]
    assert isinstance(got, Tensor) and got.shape == tuple(v.shape), k
    np.testing.assert_array_equal(as_numpy(got), as_numpy(v), err_msg=k)
  assert out["model"]["bf16"].dtype == dtypes.bfloat16 and out["model"]["u64"].dtype == dtypes.uint64
  assert out["model"]["bool"].dtype == dtypes.bool and out["model"]["1.num_batches_tracked"].dtype == dtypes.int64

def test_big_endian_checkpoint(tmp_path):
  """A zip checkpoint whose byteorder record says big: its storages' bytes are read swapped (made here from a little-endian
  one, since torch.save writes the machine's order)."""
  sd = {"f": torch.randn(3, 4), "h": torch.randn(5).half(), "i": torch.arange(-3, 3), "b": torch.tensor([True, False])}
  torch.save(sd, tmp_path / "little.pt")
  with zipfile.ZipFile(tmp_path / "little.pt") as src, zipfile.ZipFile(tmp_path / "big.pt", "w") as dst:
    for name in src.namelist():
      data = src.read(name)
      if name.endswith("/byteorder"): data = b"big"
      elif "/data/" in name:  # storages "0" to "3", in the dict's order
        width = [v.element_size() for v in sd.values()][int(name.rsplit("/", 1)[1])]
        data = np.frombuffer(data, f"<u{width}").astype(f">u{width}").tobytes()
      dst.writestr(name, data)
  out = torch_load(tmp_path / "big.pt")
  for k, v in sd.items(): np.testing.assert_array_equal(out[k].numpy(), v.numpy(), err_msg=k)

def test_a_storage_of_the_wrong_size_is_refused(tmp_path):
  torch.save({"w": torch.ones(4)}, tmp_path / "ok.pt")
  with zipfile.ZipFile(tmp_path / "ok.pt") as src, zipfile.ZipFile(tmp_path / "short.pt", "w") as dst:
    for name in src.namelist(): dst.writestr(name, src.read(name)[:-4] if name.endswith("/data/0") else src.read(name))
  with pytest.raises(pickle.UnpicklingError, match="short.pt: storage 0 holds 12 bytes, the checkpoint says 4 of dtypes.float32"):
    torch_load(tmp_path / "short.pt")

def test_pytorch_weights_run_in_a_tinyspec_model(tmp_path):
  """A PyTorch model's state dict, loaded into the same layers here (PyTorch's names and layouts), gives its outputs."""
  tm = torch_model().eval()
  with torch.no_grad(): tm[1].running_mean.uniform_(-1, 1); tm[1].running_var.uniform_(0.5, 2)
  torch.save(tm.state_dict(), tmp_path / "m.pt")
  class Model:
    def __init__(self): self.layers = {"0": Conv2d(3, 4, 3), "1": BatchNorm2d(4), "3": Linear(16, 2)}
    def __call__(self, x): return self.layers["3"](self.layers["1"](self.layers["0"](x)).flatten(1))
  m = Model()
  load_state_dict(m.layers, torch_load(tmp_path / "m.pt"))
  x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
  np.testing.assert_allclose(m(Tensor(x)).numpy(), tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)

class RemovesAFile:
  def __init__(self, path): self.path = path
  def __reduce__(self): return (os.remove, (self.path,))

@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_code_in_a_checkpoint_is_refused_not_run(tmp_path, legacy):
  marker = tmp_path / "marker"
  marker.write_text("still here")
  torch.save({"w": torch.ones(2), "x": RemovesAFile(str(marker))}, tmp_path / "evil.pt", _use_new_zipfile_serialization=not legacy)
  with pytest.raises(pickle.UnpicklingError, match=r"evil.pt: refusing (posix|nt)\.remove"): torch_load(tmp_path / "evil.pt")
  (tmp_path / "plain.pkl").write_bytes(pickle.dumps(RemovesAFile(str(marker))))  # a bare pickle, read as a legacy file's first
  with pytest.raises(pickle.UnpicklingError, match="plain.pkl: not a PyTorch checkpoint"): torch_load(tmp_path / "plain.pkl")
  assert marker.read_text() == "still here"

def test_unknown_dtypes_and_other_files_are_named(tmp_path):
  torch.save({"c": torch.ones(2, dtype=torch.complex64)}, tmp_path / "complex.pt")
  with pytest.raises(pickle.UnpicklingError, match=r"refusing torch\.ComplexFloatStorage"): torch_load(tmp_path / "complex.pt")
  (tmp_path / "text.pt").write_bytes(b"hello")
  with pytest.raises(pickle.UnpicklingError, match="text.pt: not a PyTorch checkpoint"): torch_load(tmp_path / "text.pt")
  with zipfile.ZipFile(tmp_path / "other.zip", "w") as z: z.writestr("a.txt", "x")
  with pytest.raises(pickle.UnpicklingError, match=r"other.zip: a zip file but not a PyTorch checkpoint"): torch_load(tmp_path / "other.zip")

def test_a_tensor_outside_its_storage_is_refused(tmp_path):
  """A hand-made checkpoint whose tensor claims 10 elements of a 4-element storage: refused before any memory is read."""
  class Storage: pass
  class Record:
    def __reduce__(self): return (torch._utils._rebuild_tensor_v2, (Storage(), 0, (10,), (1,), False, {}))
  buf = io.BytesIO()
  pickler = pickle.Pickler(buf, protocol=2)
  pickler.persistent_id = lambda obj: ("storage", torch.FloatStorage, "0", "cpu", 4) if isinstance(obj, Storage) else None
  pickler.dump({"w": Record()})
  with zipfile.ZipFile(tmp_path / "bad.pt", "w") as z:
    z.writestr("bad/data.pkl", buf.getvalue()); z.writestr("bad/data/0", np.arange(4, dtype=np.float32).tobytes())
  with pytest.raises(pickle.UnpicklingError, match=r"shape \(10,\), strides \(1,\) at offset 0 lies outside its storage of 4 elements"):
    torch_load(tmp_path / "bad.pt")
