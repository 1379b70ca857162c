"""nn.state: state dicts (names, loading with checks) and the safetensors format (against the spec byte by byte, against the
`safetensors` package where installed, and on broken files)."""
import errno
import json
import os
import signal
import stat
import struct
import subprocess
import sys
import textwrap

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
  header, data = _read_spec((tmp_path / "t.safetensors").read_bytes())
  for k, want in (("x", arr), ("scalar", arr[1, 2]), ("empty", arr[:0])):
    assert out[k].dtype == dt and out[k].shape == want.shape
    np.testing.assert_array_equal(out[k].numpy(), want)
    b, e = header[k]["data_offsets"]
    assert data[b:e] == np.asarray(want).astype(want.dtype.newbyteorder("<")).tobytes()  # numpy's own bytes, little-endian

def test_round_trip_bfloat16(tmp_path):
  vals = (np.arange(-3, 9).reshape(3, 4) * 1.5).astype(np.float32)  # exact in bfloat16: its bits are float32's top half
  bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
  safe_save({"x": Tensor(vals).cast(dtypes.bfloat16), "scalar": Tensor(vals[1, 2]).cast(dtypes.bfloat16)}, tmp_path / "b.safetensors")
  out = safe_load(tmp_path / "b.safetensors")
  header, data = _read_spec((tmp_path / "b.safetensors").read_bytes())
  for k, want in (("x", bits), ("scalar", bits[1, 2])):
    assert out[k].dtype == dtypes.bfloat16 and out[k].shape == want.shape and header[k]["dtype"] == "BF16"
    np.testing.assert_array_equal(engine.to_numpy(out[k].uop), want)
    np.testing.assert_array_equal(out[k].cast(dtypes.float32).numpy(), vals if k == "x" else vals[1, 2])
    b, e = header[k]["data_offsets"]
    assert data[b:e] == want.astype("<u2").tobytes()

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

# ---- safetensors: broken files ----

_GOOD = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "U8", "shape": [2], "data_offsets": [8, 10]}}
_DATA = struct.pack("<2f", 1.0, 2.0) + bytes([3, 4])

def _with(name: str, **info) -> dict: return {**_GOOD, name: {**_GOOD[name], **info}}

def _header_text(text: str) -> bytes:
  """A file whose header is `text` as written (for JSON that json.dumps cannot produce), followed by _DATA."""
  return struct.pack("<Q", len(text.encode())) + text.encode() + _DATA

_EMPTY_C = {"dtype": "F32", "data_offsets": [10, 10]}  # an empty third tensor after a and b: only its shape matters

_BAD_FILES = [  # (id, the file's bytes, a regex for what the error must name)
  ("empty", b"", "empty file: 0 bytes"),
  ("3 bytes", b"\x10\x00\x00", "truncated: 3 bytes, shorter than the 8-byte header length"),
  ("8 bytes, length 0", bytes(8), "its length is 0"),
  ("8 bytes, length 16", struct.pack("<Q", 16), "truncated: the header says 16 bytes but only 0 follow"),
  ("header cut short", struct.pack("<Q", 64) + b"{}", "truncated: the header says 64 bytes but only 2 follow"),
  ("huge header length", struct.pack("<Q", 2 ** 40) + b"{}", "its length 1099511627776 is over the limit"),
  ("max header length", b"\xff" * 8 + b"{}", "over the limit"),
  ("not JSON", struct.pack("<Q", 5) + b"{abc}", "not valid JSON"),
  ("not UTF-8", struct.pack("<Q", 2) + b"\xff\xfe", "not UTF-8"),
  ("JSON array", struct.pack("<Q", 2) + b"[]", "a JSON object expected, got list"),
  ("JSON string", struct.pack("<Q", 3) + b'"x"', "a JSON object expected, got str"),
  ("nested deeply", _header_text('{"a":' + "[" * 100_000 + "]" * 100_000 + "}"), "nested too deeply"),
  ("duplicate name", struct.pack("<Q", 17) + b'{"a":{}, "a":{}} ', "the key 'a' appears twice"),
  ("duplicate field", _header_text('{"a":{"dtype":"F32","dtype":"U8","shape":[2],"data_offsets":[0,8]},'
                                   '"b":{"dtype":"U8","shape":[2],"data_offsets":[8,10]}}'), "the key 'dtype' appears twice"),
  ("entry a list", _spec_file({**_GOOD, "c": [1, 2]}, _DATA), r"'c' must be an object with dtype, shape and data_offsets, got \[1, 2\]"),
  ("entry a string", _spec_file({**_GOOD, "c": "F32"}, _DATA), "'c' must be an object .* got 'F32'"),
  ("no data_offsets", _spec_file({**_GOOD, "c": {"dtype": "F32", "shape": [1]}}, _DATA), "'c' needs the keys .* it lacks data_offsets"),
  ("unknown dtype", _spec_file(_with("b", dtype="X9"), _DATA), "'b' has dtype 'X9'; known: BOOL"),
  ("lowercase dtype", _spec_file(_with("b", dtype="u8"), _DATA), "'b' has dtype 'u8'"),
  ("dtype a list", _spec_file(_with("b", dtype=["U8"]), _DATA), r"'b' has dtype \['U8'\]"),
  ("dtype null", _spec_file(_with("b", dtype=None), _DATA), "'b' has dtype None"),
  ("negative dim", _spec_file(_with("b", shape=[-2]), _DATA), r"'b' has shape \[-2\], not a list of non-negative ints"),
  ("float dim", _spec_file(_with("b", shape=[2.0]), _DATA), r"shape \[2.0\], not a list of non-negative ints"),
  ("bool dim", _spec_file(_with("b", shape=[True, 2]), _DATA), r"shape \[True, 2\], not a list"),
  ("NaN dim", _header_text('{"b":{"dtype":"U8","shape":[NaN],"data_offsets":[0,10]}}'), r"shape \[nan\], not a list"),
  ("shape a string", _spec_file(_with("b", shape="2"), _DATA), "shape '2', not a list"),
  ("shape an int", _spec_file(_with("b", shape=2), _DATA), "shape 2, not a list"),
  ("dim too large", _spec_file({**_GOOD, "c": {**_EMPTY_C, "shape": [0, 2 ** 70]}}, _DATA), "'c' has shape .* which no array can have"),
  ("too many dims", _spec_file({**_GOOD, "c": {**_EMPTY_C, "shape": [0] * 100}}, _DATA), "which no array can have"),
  ("5000-digit dim", _header_text('{"b":{"dtype":"U8","shape":[1' + "0" * 5000 + '],"data_offsets":[0,10]}}'),
   "not valid JSON|which no array can have"),  # Python >= 3.11 refuses to parse the number; older ones parse it
  ("one offset", _spec_file(_with("b", data_offsets=[8]), _DATA), r"data_offsets \[8\], not two ints \[begin, end\]"),
  ("begin after end", _spec_file(_with("b", data_offsets=[9, 8]), _DATA), "with 0 <= begin <= end"),
  ("negative offset", _spec_file(_with("a", data_offsets=[-8, 0]), _DATA), r"data_offsets \[-8, 0\], not two ints"),
  ("float offset", _spec_file(_with("b", data_offsets=[8, 10.0]), _DATA), r"data_offsets \[8, 10.0\], not two ints"),
  ("bool offset", _spec_file(_with("a", data_offsets=[False, 8]), _DATA), r"data_offsets \[False, 8\], not two ints"),
  ("string offsets", _spec_file(_with("b", data_offsets=["8", "10"]), _DATA), r"data_offsets \['8', '10'\], not two ints"),
  ("offsets an object", _spec_file(_with("b", data_offsets={"begin": 8}), _DATA), "data_offsets {'begin': 8}, not two ints"),
  ("data cut short", _spec_file(_GOOD, _DATA[:9]), r"data_offsets \[8, 10\] of 'b' are out of range: the data is 9 bytes"),
  ("offsets past the end", _spec_file(_with("b", data_offsets=[8, 20], shape=[12]), _DATA), "out of range"),
  ("size mismatch", _spec_file(_with("b", shape=[3]), _DATA), r"'b' of shape \(3,\) and dtype U8 needs 3 bytes, its data_offsets \[8, 10\] give 2"),
  ("overlap", _spec_file(_with("b", data_offsets=[6, 8]), _DATA), "start at 6, expected 8 \\(overlap\\)"),
  ("gap", _spec_file({"b": {"dtype": "U8", "shape": [2], "data_offsets": [8, 10]}}, _DATA), "start at 8, expected 0 \\(gap\\)"),
  ("trailing bytes", _spec_file(_GOOD, _DATA + b"xx"), "2 bytes after the last tensor belong to none"),
  ("metadata value an int", _spec_file(_GOOD, _DATA, {"k": 3}), "__metadata__ must be an object of strings, got {'k': 3}"),
  ("metadata a list", _header_text('{"__metadata__":[],' + json.dumps(_GOOD)[1:]), r"__metadata__ must be an object of strings, got \[\]"),
]

@pytest.mark.parametrize("raw, msg", [c[1:] for c in _BAD_FILES], ids=[c[0] for c in _BAD_FILES])
def test_bad_files(raw, msg, tmp_path, monkeypatch):
  made, mapped = [], []
  monkeypatch.setattr(engine, "from_numpy", lambda *a: made.append(a))  # no tensor may be made before the whole file checks
  monkeypatch.setattr(np, "memmap", lambda *a, **k: mapped.append(a))  # nor the file mapped
  (p := tmp_path / "bad.safetensors").write_bytes(raw)
  for src, what in ((raw, "safetensors data"), (p, str(p))):
    for load in (safe_load, safe_load_metadata):
      with pytest.raises(SafetensorsError, match=msg) as e: load(src)
      assert str(e.value).startswith(f"{what}: ")  # the error says which file
      assert len(str(e.value)) < 400  # a hostile header's contents are cut short, not echoed whole
  assert not made and not mapped

def test_good_files_of_the_broken_set(tmp_path):
  out = safe_load(_spec_file(_with("a", extra="ignored"), _DATA))  # keys beyond the three are ignored, as the reference does
  assert out["a"].tolist() == [1.0, 2.0] and out["b"].tolist() == [3, 4]
  raw = _header_text('{"__metadata__":null,' + json.dumps(_GOOD)[1:])  # null metadata is none
  assert safe_load_metadata(raw) == {} and safe_load(raw)["b"].tolist() == [3, 4]
  (p := tmp_path / "e.safetensors").write_bytes(_spec_file({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}}, b""))
  assert safe_load(p)["e"].shape == (0, 3)  # a file with no data bytes at all maps

def test_bad_paths(tmp_path):
  with pytest.raises(SafetensorsError, match=f"{tmp_path}: a directory, not a safetensors file"): safe_load(tmp_path)
  with pytest.raises(SafetensorsError, match="a directory"): safe_load_metadata(tmp_path)
  with pytest.raises(FileNotFoundError): safe_load(tmp_path / "missing.safetensors")  # an absent file is not a malformed one
  if hasattr(os, "mkfifo"):  # opening a pipe would block until a writer came
    os.mkfifo(fifo := tmp_path / "pipe")
    with pytest.raises(SafetensorsError, match=f"{fifo}: not a regular file"): safe_load(fifo)

def _bytes_read() -> int:
  """Bytes this process has read through read() calls (Linux's /proc/self/io), which a memory map's page faults are not."""
  with open("/proc/self/io") as f: return int(next(line for line in f if line.startswith("rchar:")).split()[1])

_PROC_IO = os.path.exists("/proc/self/io")

def test_truncated_big_file_refused_unread(tmp_path, monkeypatch):
  n = 8 * 2 ** 20  # 32 MiB of float32, one byte short
  head = _spec_file({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}, b"")
  with open(p := tmp_path / "big.safetensors", "wb") as f:
    f.write(head)
    f.truncate(len(head) + 4 * n - 1)  # sparse: no disk used
  mapped = []
  monkeypatch.setattr(np, "memmap", lambda *a, **k: mapped.append(a))
  before = _bytes_read() if _PROC_IO else 0
  with pytest.raises(SafetensorsError, match=rf"data_offsets \[0, {4 * n}\] of 'w' are out of range: the data is {4 * n - 1} bytes"): safe_load(p)
  if _PROC_IO: assert _bytes_read() - before < 2 ** 16  # the header was read, not the 32 MiB
  assert not mapped

def test_big_file_is_mapped_not_read(tmp_path):
  want = np.arange(4 * 2 ** 20, dtype=np.float32)  # 16 MiB
  (p := tmp_path / "big.safetensors").write_bytes(_spec_file({"w": {"dtype": "F32", "shape": [want.size], "data_offsets": [0, want.nbytes]}},
                                                             want.astype("<f4").tobytes()))
  before = _bytes_read() if _PROC_IO else 0
  out = safe_load(p)
  if _PROC_IO: assert _bytes_read() - before < 2 ** 16  # the data came through the map
  with open(p, "r+b") as f:  # the tensor is a copy on the device: changing the file afterwards changes nothing
    f.seek(-4, os.SEEK_END)
    f.write(b"\0\0\0\0")
  np.testing.assert_array_equal(out["w"].numpy(), want)

# ---- safetensors: saves that fail ----

def _old_checkpoint(tmp_path) -> tuple:
  p = tmp_path / "ckpt.safetensors"
  old = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([7, -8], np.int64)}
  safe_save({k: Tensor(v) for k, v in old.items()}, p, metadata={"step": "1"})
  return p, old, p.read_bytes()

def _assert_intact(p, old, raw) -> None:
  assert p.read_bytes() == raw
  out = safe_load(p)
  for k, v in old.items(): np.testing.assert_array_equal(out[k].numpy(), v)
  assert safe_load_metadata(p) == {"step": "1"}
  assert os.listdir(p.parent) == [p.name]  # no temporary file left beside it

# i is written first (largest itemsize) and is bigger than the file's write buffer, so it reaches the temporary file before a failure
_NEW = {"w": np.ones((2, 3), np.float32), "i": np.arange(4096, dtype=np.int64), "b": np.zeros(5, np.uint8)}

@pytest.mark.parametrize("where", ["write", "interrupt", "fsync", "replace"])
def test_failed_save_keeps_old(tmp_path, monkeypatch, where):
  p, old, raw = _old_checkpoint(tmp_path)
  seen = []
  numpy, calls = Tensor.numpy, []
  def failing_numpy(self):
    calls.append(self)
    if len(calls) == 2:  # the header and the first tensor are in the temporary file by now
      seen.extend((q.name, q.stat().st_size) for q in tmp_path.iterdir() if q != p)
      raise OSError(errno.ENOSPC, "No space left on device") if where == "write" else KeyboardInterrupt()
    return numpy(self)
  def fail(*a): raise OSError(errno.EIO, f"{where} failed")
  if where in ("write", "interrupt"): monkeypatch.setattr(Tensor, "numpy", failing_numpy)
  else: monkeypatch.setattr(os, where, fail)
  with pytest.raises(OSError if where != "interrupt" else KeyboardInterrupt): safe_save({k: Tensor(v) for k, v in _NEW.items()}, p)
  monkeypatch.undo()
  if where in ("write", "interrupt"):
    assert len(seen) == 1 and seen[0][0].startswith(".ckpt.safetensors.") and seen[0][1] > 8  # it existed, half written, and is gone
  _assert_intact(p, old, raw)

@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs POSIX file-size limits (RLIMIT_FSIZE)")
def test_save_past_file_size_limit_keeps_old(tmp_path):
  p, old, raw = _old_checkpoint(tmp_path)
  code = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np
    from tinyspec import Tensor
    from tinyspec.nn.state import safe_save
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing the process
    w = Tensor(np.ones((512, 512), np.float32))
    Tensor.realize(w)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try: safe_save({"w": w}, sys.argv[1])
    except OSError as e: print("errno", e.errno)
    else: print("saved")
  """)
  r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.split() == ["errno", str(errno.EFBIG)], r.stdout + r.stderr
  _assert_intact(p, old, raw)

def test_save_errors(tmp_path):
  p, old, raw = _old_checkpoint(tmp_path)
  with pytest.raises(SafetensorsError, match="not a Tensor"): safe_save({"x": np.zeros(2)}, p)
  with pytest.raises(SafetensorsError, match="__metadata__"): safe_save({"__metadata__": Tensor([1.0])}, p)
  with pytest.raises(SafetensorsError, match="metadata must map str to str"): safe_save({"x": Tensor([1.0])}, p, {"a": 1})
  with pytest.raises(SafetensorsError, match="not a Tensor"): safe_save({"x": Tensor([1.0]), "y": [1.0]}, tmp_path / "new")
  _assert_intact(p, old, raw)  # nothing written: not the old file, not a new one, no temporary
  with pytest.raises(IsADirectoryError): safe_save({"x": Tensor([1.0])}, tmp_path)
  with pytest.raises(FileNotFoundError): safe_save({"x": Tensor([1.0])}, tmp_path / "no" / "dir.safetensors")
  _assert_intact(p, old, raw)

def test_save_replaces_whole(tmp_path):
  p, _, _ = _old_checkpoint(tmp_path)
  safe_save({k: Tensor(v) for k, v in _NEW.items()}, p)
  out = safe_load(p)
  assert set(out) == set(_NEW) and safe_load_metadata(p) == {}
  for k, v in _NEW.items(): np.testing.assert_array_equal(out[k].numpy(), v)
  assert os.listdir(tmp_path) == [p.name]

@pytest.mark.skipif(not hasattr(os, "O_DIRECTORY"), reason="directories are synced only where they can be opened (POSIX)")
def test_save_syncs_then_renames(tmp_path, monkeypatch):
  events, fsync, replace = [], os.fsync, os.replace
  def spy_fsync(fd):
    events.append("fsync " + ("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else f"file of {os.fstat(fd).st_size} bytes"))
    fsync(fd)
  def spy_replace(src, dst):
    events.append(f"replace {os.path.basename(src).startswith('.m.safetensors.')} {os.path.basename(dst)}")
    replace(src, dst)
  monkeypatch.setattr(os, "fsync", spy_fsync)
  monkeypatch.setattr(os, "replace", spy_replace)
  safe_save({"w": Tensor(np.zeros(4, np.float32))}, p := tmp_path / "m.safetensors")
  assert events == [f"fsync file of {p.stat().st_size} bytes", "replace True m.safetensors", "fsync dir"]

@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions and symlinks")
def test_save_keeps_mode_and_symlink(tmp_path):
  p, _, _ = _old_checkpoint(tmp_path)
  p.chmod(0o640)
  safe_save({"w": Tensor([1.0])}, p)
  assert stat.S_IMODE(p.stat().st_mode) == 0o640
  (link := tmp_path / "latest.safetensors").symlink_to(p.name)
  safe_save({"w": Tensor([2.0])}, link)
  assert link.is_symlink() and safe_load(p)["w"].tolist() == [2.0]  # the link still points at the file, which has the new value
  (plain := tmp_path / "plain").write_bytes(b"")
  safe_save({"w": Tensor([3.0])}, fresh := tmp_path / "fresh.safetensors")
  assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)  # a new file gets what open() would give it

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
