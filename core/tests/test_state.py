"""nn.state: state dicts (names, loading with checks) and the safetensors format (against the spec byte by byte, against the
`safetensors` package where installed, and on broken files)."""
import json
import struct

import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.engine import realize as engine
from tinyspec.nn import BatchNorm, Conv2d, Linear
from tinyspec.nn.state import SafetensorsError, get_parameters, get_state_dict, load_state_dict, safe_load, safe_load_metadata, safe_save


class Net:
  def __init__(self):
    self.conv = Conv2d(1, 2, 3)
    self.bn = BatchNorm(2)
    self.layers = [Linear(4, 3), Linear(3, 2, bias=False)]
    self.heads = {"a": Linear(2, 1)}
    self.act = "relu"  # not a tensor: ignored
    self.parent = self  # a cycle: walked once
    self.lib = np  # a module: not walked

def _vals(sd: dict) -> dict: return {k: v.numpy() for k, v in sd.items()}

# ---- state dicts ----

def test_state_dict_names():
  Tensor.manual_seed(0)
  assert list(get_state_dict(Net())) == ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                                         "bn.num_batches_tracked", "layers.0.weight", "layers.0.bias", "layers.1.weight", "heads.a.weight",
                                         "heads.a.bias"]
  assert list(get_state_dict(Linear(2, 2), prefix="fc.")) == ["fc.weight", "fc.bias"]
  assert list(get_state_dict((Tensor([1.0]), {"x": [Tensor([2.0])]}))) == ["0", "1.x.0"]

def test_parameters_once():
  Tensor.manual_seed(0)
  a, b = Linear(2, 2), Linear(2, 2)
  b.weight = a.weight  # tied weights: one parameter
  ps = get_parameters([a, b])
  assert len(ps) == 3 and ps[0] is a.weight and len(get_state_dict([a, b])) == 4

def test_torch_names():
  torch = pytest.importorskip("torch")
  tm = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.Linear(4, 3))
  Tensor.manual_seed(0)
  assert list(get_state_dict([Conv2d(1, 2, 3), BatchNorm(2), Linear(4, 3)])) == list(tm.state_dict())

def test_load_state_dict():
  Tensor.manual_seed(0)
  src, dst = Net(), Net()
  w = dst.layers[0].weight
  load_state_dict(dst, get_state_dict(src))
  assert dst.layers[0].weight is w  # the same Tensor objects, new values
  for k, v in _vals(get_state_dict(src)).items(): np.testing.assert_array_equal(get_state_dict(dst)[k].numpy(), v, err_msg=k)
  assert all(get_state_dict(dst)[k].uop.op.name == "BUFFER" for k in get_state_dict(dst))  # realized

def test_load_casts_and_takes_numpy():
  Tensor.manual_seed(0)
  lin = Linear(2, 2)
  load_state_dict(lin, {"weight": np.array([[1, 2], [3, 4]], np.int64), "bias": Tensor([0.5, 1.5], dtype=dtypes.float64)})
  assert lin.weight.dtype == lin.bias.dtype == dtypes.float32
  np.testing.assert_array_equal(lin.weight.numpy(), [[1, 2], [3, 4]])
  np.testing.assert_array_equal(lin.bias.numpy(), [0.5, 1.5])

def test_load_from_torch():
  torch = pytest.importorskip("torch")
  torch.manual_seed(0)
  tl = torch.nn.Linear(3, 2)
  lin = Linear(3, 2)
  load_state_dict(lin, {k: v.detach().numpy() for k, v in tl.state_dict().items()})
  x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
  np.testing.assert_allclose(lin(Tensor(x)).numpy(), tl(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)

def test_load_errors_change_nothing():
  Tensor.manual_seed(0)
  lin = Linear(3, 2)
  before = _vals(get_state_dict(lin))
  good = {"weight": Tensor(np.zeros((2, 3), np.float32)), "bias": Tensor(np.zeros(2, np.float32))}
  with pytest.raises(RuntimeError, match=r"Missing key\(s\) in state_dict: 'bias'"): load_state_dict(lin, {"weight": good["weight"]})
  with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: 'extra'"): load_state_dict(lin, {**good, "extra": good["bias"]})
  with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape \(3, 2\) from checkpoint, the shape in "
                                         r"the current model is \(2, 3\)"):
    load_state_dict(lin, {"weight": Tensor(np.zeros((3, 2), np.float32)), "bias": good["bias"]})
  with pytest.raises(RuntimeError) as e: load_state_dict(lin, {"weight": Tensor(np.zeros((1,), np.float32)), "other": good["bias"]})
  assert "size mismatch for weight" in str(e.value) and "'bias'" in str(e.value) and "'other'" in str(e.value)  # all problems at once
  with pytest.raises(RuntimeError, match="size mismatch"):  # shapes are checked even when not strict
    load_state_dict(lin, {"weight": Tensor(np.zeros((1,), np.float32))}, strict=False)
  for k, v in before.items(): np.testing.assert_array_equal(getattr(lin, k).numpy(), v)
  load_state_dict(lin, {"bias": good["bias"], "extra": good["bias"]}, strict=False)  # the rest is left as it was
  np.testing.assert_array_equal(lin.bias.numpy(), [0, 0])
  np.testing.assert_array_equal(lin.weight.numpy(), before["weight"])

def test_load_into_sharded_model(tmp_path):
  devs = ("PYTHON:0", "PYTHON:1")
  Tensor.manual_seed(0)
  lin = Linear(2, 4)
  lin.weight, lin.bias = lin.weight.shard(devs, axis=0), lin.bias.to(devs)
  w, b = np.arange(8, dtype=np.float32).reshape(4, 2), np.array([1, 2, 3, 4], np.float32)
  load_state_dict(lin, {"weight": w, "bias": Tensor(b).shard(devs, axis=0)})  # each value laid out as the model's tensor
  assert lin.weight.device == lin.bias.device == devs and lin.weight.uop.axis == 0 and lin.bias.uop.axis is None
  np.testing.assert_array_equal(lin(Tensor(np.ones((1, 2), np.float32)).to(devs)).numpy(), [[2, 7, 12, 17]])
  safe_save(get_state_dict(lin), tmp_path / "s.safetensors")  # a sharded tensor is saved whole
  out = safe_load(tmp_path / "s.safetensors")
  np.testing.assert_array_equal(out["weight"].numpy(), w)
  np.testing.assert_array_equal(out["bias"].numpy(), b)

# ---- safetensors: the format itself ----

def _spec_file(entries: dict, data: bytes, metadata: dict | None = None, pad: bool = True) -> bytes:
  """A safetensors file built by hand from the spec: u64 little-endian header length, JSON header, data."""
  header = dict(entries, **({"__metadata__": metadata} if metadata else {}))
  text = json.dumps(header).encode()
  if pad: text += b" " * (-len(text) % 8)
  return struct.pack("<Q", len(text)) + text + data

def _read_spec(raw: bytes) -> tuple[dict, bytes]:
  """The reading half of the spec, independent of the code under test."""
  (n,) = struct.unpack("<Q", raw[:8])
  return json.loads(raw[8:8 + n]), raw[8 + n:]

def test_load_hand_built_bytes():
  data = struct.pack("<3f", 1.5, -2.0, 3.25) + struct.pack("<2h", -7, 300) + bytes([1, 0, 2]) + struct.pack("<q", -(2 ** 40))
  raw = _spec_file({"f": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                    "h": {"dtype": "I16", "shape": [2, 1], "data_offsets": [12, 16]},
                    "b": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]},
                    "q": {"dtype": "I64", "shape": [], "data_offsets": [19, 27]}}, data, {"format": "pt"}, pad=False)
  out = safe_load(raw)
  assert list(out) == ["f", "h", "b", "q"]
  assert [out[k].dtype for k in out] == [dtypes.float32, dtypes.int16, dtypes.bool, dtypes.int64]
  assert out["f"].tolist() == [1.5, -2.0, 3.25] and out["h"].tolist() == [[-7], [300]]
  assert out["b"].tolist() == [True, False, True] and out["q"].tolist() == -(2 ** 40) and out["q"].shape == ()
  assert safe_load_metadata(raw) == {"format": "pt"}

def test_save_follows_spec(tmp_path):
  f = tmp_path / "a.safetensors"
  safe_save({"w": Tensor([[1.0, 2.0]]), "i": Tensor([7, 8, 9], dtype=dtypes.uint8), "d": Tensor([0.5], dtype=dtypes.float64)}, f,
            metadata={"note": "hi"})
  raw = f.read_bytes()
  header, data = _read_spec(raw)
  assert (8 + struct.unpack("<Q", raw[:8])[0]) % 8 == 0  # header padded: the data starts 8-aligned
  assert header["__metadata__"] == {"note": "hi"}
  assert header["w"] == {"dtype": "F32", "shape": [1, 2], "data_offsets": header["w"]["data_offsets"]}
  for k, fmt in (("w", "<2f"), ("i", "<3B"), ("d", "<d")):
    b, e = header[k]["data_offsets"]
    assert b % struct.calcsize(fmt[-1]) == 0  # each tensor aligned to its itemsize
    assert struct.unpack(fmt, data[b:e]) == {"w": (1.0, 2.0), "i": (7, 8, 9), "d": (0.5,)}[k]
  assert sum(e - b for b, e in (header[k]["data_offsets"] for k in "wid")) == len(data)

@pytest.mark.parametrize("dt", [dtypes.bool, dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32,
                                dtypes.int64, dtypes.uint64, dtypes.float16, dtypes.float32, dtypes.float64])
def test_round_trip_dtypes(tmp_path, dt):
  arr = (np.arange(-3, 9).reshape(3, 4) * 1.5).astype(dt.np)
  safe_save({"x": Tensor(arr), "scalar": Tensor(arr[1, 2]), "empty": Tensor(arr[:0])}, tmp_path / "t.safetensors")
  out = safe_load(tmp_path / "t.safetensors")
  for k, want in (("x", arr), ("scalar", arr[1, 2]), ("empty", arr[:0])):
    assert out[k].dtype == dt and out[k].shape == want.shape
    np.testing.assert_array_equal(out[k].numpy(), want)

def test_bfloat16_raw_bits(tmp_path):
  bits = np.array([0x3FC0, 0xC000, 0x7F80], np.uint16)  # 1.5, -2.0, inf in bfloat16
  raw = _spec_file({"b": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}, bits.astype("<u2").tobytes())
  t = safe_load(raw)["b"]
  assert t.dtype == dtypes.bfloat16
  np.testing.assert_array_equal(engine.to_numpy(t.uop), bits)
  safe_save({"b": t}, tmp_path / "b.safetensors")
  header, data = _read_spec((tmp_path / "b.safetensors").read_bytes())
  assert header == {"b": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}} and data == bits.astype("<u2").tobytes()

def test_model_round_trip(tmp_path):
  Tensor.manual_seed(0)
  a, b = Net(), Net()
  safe_save(get_state_dict(a), tmp_path / "m.safetensors")
  load_state_dict(b, safe_load(tmp_path / "m.safetensors"))
  for k, v in _vals(get_state_dict(a)).items(): np.testing.assert_array_equal(get_state_dict(b)[k].numpy(), v, err_msg=k)

def test_save_errors(tmp_path):
  with pytest.raises(SafetensorsError, match="not a Tensor"): safe_save({"x": np.zeros(2)}, tmp_path / "x")
  with pytest.raises(SafetensorsError, match="__metadata__"): safe_save({"__metadata__": Tensor([1.0])}, tmp_path / "x")
  with pytest.raises(SafetensorsError, match="metadata must map str to str"): safe_save({"x": Tensor([1.0])}, tmp_path / "x", {"a": 1})
  assert not (tmp_path / "x").exists()

# ---- safetensors: broken files ----

_GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [8, 10]}}
_DATA = struct.pack("<2f", 1.0, 2.0) + bytes([3, 4])

def _with(name: str, **info) -> dict: return {**_GOOD, name: {**_GOOD[name], **info}}

@pytest.mark.parametrize("raw, msg", [
  (b"\x10\x00\x00", "truncated: 3 bytes"),
  (struct.pack("<Q", 64) + b"{}", "truncated: the header says 64 bytes"),
  (struct.pack("<Q", 2 ** 40) + b"{}", "over the limit"),
  (struct.pack("<Q", 5) + b"{abc}", "not UTF-8 JSON"),
  (struct.pack("<Q", 2) + b"\xff\xfe", "not UTF-8 JSON"),
  (struct.pack("<Q", 2) + b"[]", "a JSON object expected"),
  (struct.pack("<Q", 17) + b'{"a":{}, "a":{}} ', "appears twice"),
  (_spec_file(_with("b", dtype="X9"), _DATA), "dtype 'X9'"),
  (_spec_file(_with("b", shape=[-2]), _DATA), "not a list of non-negative ints"),
  (_spec_file(_with("b", data_offsets=[8]), _DATA), "not \\[begin, end\\]"),
  (_spec_file(_with("b", data_offsets=[9, 8]), _DATA), "not \\[begin, end\\]"),
  (_spec_file({**_GOOD, "c": {"dtype": "F32", "shape": [1]}}, _DATA), "needs the keys dtype, shape and data_offsets"),
  (_spec_file(_GOOD, _DATA[:9]), "out of range: the data is 9 bytes"),
  (_spec_file(_with("b", data_offsets=[8, 20], shape=[12]), _DATA), "out of range"),
  (_spec_file(_with("b", shape=[3]), _DATA), "needs 3 bytes"),
  (_spec_file(_with("b", data_offsets=[6, 8]), _DATA), "overlap"),
  (_spec_file({"b": {"dtype": "U8", "shape": [2], "data_offsets": [8, 10]}}, _DATA), "gap"),
  (_spec_file(_GOOD, _DATA + b"xx"), "2 bytes after the last tensor"),
  (_spec_file(_GOOD, _DATA, {"k": 3}), "__metadata__ must be an object of strings"),
])
def test_bad_files(raw, msg, monkeypatch):
  made = []
  monkeypatch.setattr(engine, "from_numpy", lambda *a: made.append(a))  # no tensor may be made before the whole file checks
  with pytest.raises(SafetensorsError, match=msg): safe_load(raw)
  assert not made

def test_good_file_of_the_broken_set():
  out = safe_load(_spec_file(_with("a", extra="ignored"), _DATA))
  assert out["a"].tolist() == [1.0, 2.0] and out["b"].tolist() == [3, 4]

def test_bad_file_on_disk(tmp_path):
  (p := tmp_path / "cut.safetensors").write_bytes(_spec_file(_GOOD, _DATA)[:-1])
  with pytest.raises(SafetensorsError, match=f"{p}: data_offsets"): safe_load(p)

# ---- safetensors: the reference implementation ----

def test_reference_reads_ours(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  arrs = {"f": np.arange(6, dtype=np.float32).reshape(2, 3), "h": np.array([1.5, -2], np.float16), "q": np.array([-5, 2 ** 40], np.int64),
          "b": np.array([True, False]), "u": np.array([1, 2, 3], np.uint16), "s": np.array(7.0, np.float64)}
  safe_save({k: Tensor(v) for k, v in arrs.items()}, tmp_path / "ours.safetensors", metadata={"who": "tinyspec"})
  back = st.load_file(str(tmp_path / "ours.safetensors"))
  assert set(back) == set(arrs)
  for k, v in arrs.items():
    assert back[k].dtype == v.dtype and back[k].shape == v.shape
    np.testing.assert_array_equal(back[k], v)
  from safetensors import safe_open
  with safe_open(str(tmp_path / "ours.safetensors"), "np") as f: assert f.metadata() == {"who": "tinyspec"}

def test_we_read_reference(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  arrs = {"w": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "i": np.array([[1, -2]], np.int32), "u": np.array([255], np.uint8),
          "z": np.zeros((0, 2), np.float64), "b": np.array([False, True, True])}
  st.save_file(arrs, str(tmp_path / "ref.safetensors"), metadata={"format": "np"})
  out = safe_load(tmp_path / "ref.safetensors")
  assert safe_load_metadata(tmp_path / "ref.safetensors") == {"format": "np"}
  for k, v in arrs.items():
    assert out[k].dtype == dtypes.from_np(v.dtype) and out[k].shape == v.shape
    np.testing.assert_array_equal(out[k].numpy(), v)

def test_reference_bfloat16(tmp_path):
  torch = pytest.importorskip("torch")
  st = pytest.importorskip("safetensors.torch")
  ref = torch.tensor([1.5, -2.0, 3.140625], dtype=torch.bfloat16)
  st.save_file({"x": ref}, str(tmp_path / "bf.safetensors"))
  t = safe_load(tmp_path / "bf.safetensors")["x"]
  assert t.dtype == dtypes.bfloat16
  np.testing.assert_array_equal(engine.to_numpy(t.uop), ref.view(torch.int16).numpy().view(np.uint16))
  safe_save({"x": t}, tmp_path / "bf2.safetensors")
  assert torch.equal(st.load_file(str(tmp_path / "bf2.safetensors"))["x"], ref)
