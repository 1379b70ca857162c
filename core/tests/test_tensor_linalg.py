"""The factorizations of tensor/linalg.py against numpy: qr, svd, det, slogdet, solve, inverse, cholesky and the
Newton-Schulz iteration; the last five's gradients against PyTorch's here too (qr's and svd's are in test_ops_torch.py)."""
import numpy as np
import pytest
from tinyspec import Tensor, dtypes
from tinyspec.tensor.linalg import LinAlgError


def test_newton_schulz_against_numpy():
  """Muon's quintic (3.4445, -4.7750, 2.0315), 5 steps: numpy's same iteration, wide and tall (done transposed); its
  singular values land near 1, where the iteration is meant to put them."""
  def reference(a, steps, params, eps=1e-7):
    if a.shape[-2] > a.shape[-1]: return reference(a.T, steps, params, eps).T
    x = a / (np.sqrt((a * a).sum()) + eps)
    for _ in range(steps):
      gram, term, out = x @ x.T, x, params[0] * x
      for p in params[1:]: term = gram @ term; out = out + p * term
      x = out
    return x
  a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
  for m in (a, np.ascontiguousarray(a.T)):
    got = Tensor(m).newton_schulz(5, (3.4445, -4.7750, 2.0315)).numpy()
    np.testing.assert_allclose(got, reference(m.astype(np.float64), 5, (3.4445, -4.7750, 2.0315)), atol=1e-5)
    assert np.all(np.abs(np.linalg.svd(got)[1] - 1) < 0.35)
  with pytest.raises(ValueError, match="2 dimensions"): Tensor.ones(3).newton_schulz(1, (1.0,))
  with pytest.raises(ValueError, match="at least one coefficient"): Tensor.ones(2, 3).newton_schulz(1, ())

def test_qr_factors():
  """Q orthonormal, R upper triangular with exact zeros below, Q R = A; reduced and complete shapes; a column that is
  already reduced gets no reflection; errors name what is wrong."""
  rng = np.random.default_rng(1)
  for shape in ((6, 4), (4, 6), (3, 5, 5)):
    a = rng.standard_normal(shape).astype(np.float32)
    k = min(shape[-2:])
    for mode, (qm, rm) in (("reduced", (k, k)), ("complete", (shape[-2], shape[-2]))):
      q, r = (t.numpy() for t in Tensor(a).qr(mode))
      assert q.shape == shape[:-2] + (shape[-2], qm) and r.shape == shape[:-2] + (rm, shape[-1])
      np.testing.assert_allclose(q @ r, a, atol=1e-5)
      np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(qm), q.shape[:-2] + (qm, qm)), atol=1e-5)
      assert np.all(np.tril(r, -1) == 0)
  q, r = Tensor(np.array([[-2.0, 1.0], [0.0, 3.0]], np.float32)).qr()  # already triangular: Q = I, R = A (LAPACK's too)
  np.testing.assert_array_equal(q.numpy(), np.eye(2))
  np.testing.assert_array_equal(r.numpy(), [[-2.0, 1.0], [0.0, 3.0]])
  with pytest.raises(ValueError, match="mode"): Tensor.ones(2, 2).qr("r")
  with pytest.raises(RuntimeError, match="floating point"): Tensor.ones(2, 2, dtype="int32").qr()
  with pytest.raises(RuntimeError, match="2 dimensions"): Tensor.ones(3).qr()


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (2, 7, 3), (1, 1)])
def test_svd_factors(shape):
  """S as numpy's (descending), U and Vh orthonormal with the shapes of both modes, U diag(S) Vh = A."""
  a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
  m, n = shape[-2:]
  k = min(m, n)
  for full in (True, False):
    u, s, vh = (t.numpy() for t in Tensor(a).svd(full))
    assert u.shape == shape[:-2] + (m, m if full else k) and s.shape == shape[:-2] + (k,) and vh.shape == shape[:-2] + (n if full else k, n)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), atol=1e-5)
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-5)
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(u.shape[-1]), shape[:-2] + (u.shape[-1],) * 2), atol=1e-5)
    np.testing.assert_allclose(vh @ np.swapaxes(vh, -1, -2), np.broadcast_to(np.eye(vh.shape[-2]), shape[:-2] + (vh.shape[-2],) * 2), atol=1e-5)

def test_svd_of_a_rank_one_matrix_completes_u():
  """Three singular values 0: U's columns for them are still an orthonormal completion, not 0 / 0."""
  rng = np.random.default_rng(3)
  a = np.outer(rng.standard_normal(5), rng.standard_normal(4)).astype(np.float32)
  u, s, vh = (t.numpy() for t in Tensor(a).svd())
  np.testing.assert_allclose(s[1:], 0, atol=1e-5)
  np.testing.assert_allclose(u.T @ u, np.eye(5), atol=1e-5)
  np.testing.assert_allclose((u[:, :4] * s) @ vh, a, atol=1e-5)
  with pytest.raises(RuntimeError, match="floating point"): Tensor.ones(2, 2, dtype="int32").svd()
  with pytest.raises(RuntimeError, match="2 dimensions"): Tensor.ones(3).svd()

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_factors_keep_the_dtype(dtype):
  """qr and svd return the input's dtype; the half types are factored in float32 and rounded once."""
  a = np.random.default_rng(4).standard_normal((4, 3)).astype(np.float32)
  t = Tensor(a).cast(dtype)
  for factors in (t.qr(), t.svd(False)):
    assert {f.dtype for f in factors} == {t.dtype}
  u, s, vh = (f.float().numpy() for f in t.svd(False))
  np.testing.assert_allclose((u * s) @ vh, t.float().numpy(), atol=0.02)

@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3)])
def test_factors_of_empty_matrices(shape):
  """No singular values: U and Vh are identities (full_matrices) or empty, as LAPACK gives them; qr's shapes follow."""
  m, n = shape[-2:]
  for full in (True, False):
    u, s, vh = Tensor.ones(*shape).svd(full)
    assert s.shape == shape[:-2] + (0,) and u.shape == shape[:-2] + (m, m if full else 0) and vh.shape == shape[:-2] + (n if full else 0, n)
    if full: np.testing.assert_array_equal(vh.numpy(), np.broadcast_to(np.eye(n), vh.shape))
  q, r = Tensor.ones(*shape).qr()
  assert q.shape == shape[:-2] + (m, 0) and r.shape == shape[:-2] + (0, n)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_det_solve_inverse_cholesky_against_numpy(n):
  """Batched, with matrices that need row exchanges (a zero leading entry) and a vector right-hand side."""
  rng = np.random.default_rng(n)
  a = rng.standard_normal((3, n, n)).astype(np.float32)
  if n > 1: a[1, 0, 0] = 0  # the first column's pivot must come from another row
  b = rng.standard_normal((3, n, 2)).astype(np.float32)
  spd = a @ a.transpose(0, 2, 1) + n * np.eye(n, dtype=np.float32)
  np.testing.assert_allclose(Tensor(a).det().numpy(), np.linalg.det(a), rtol=1e-4, atol=1e-5)
  sign, logabs = Tensor(a).slogdet()
  np.testing.assert_allclose(sign.numpy(), np.linalg.slogdet(a)[0])
  np.testing.assert_allclose(logabs.numpy(), np.linalg.slogdet(a)[1], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(Tensor(a).solve(Tensor(b)).numpy(), np.linalg.solve(a, b), rtol=1e-3, atol=1e-4)
  np.testing.assert_allclose(Tensor(a[0]).solve(Tensor(b[0, :, 0])).numpy(), np.linalg.solve(a[0], b[0, :, 0]), rtol=1e-3, atol=1e-4)
  np.testing.assert_allclose(Tensor(a).inverse().numpy(), np.linalg.inv(a), rtol=1e-3, atol=1e-4)
  np.testing.assert_allclose(Tensor(spd).cholesky().numpy(), np.linalg.cholesky(spd), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(Tensor(spd).cholesky(upper=True).numpy(), np.linalg.cholesky(spd).transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


def test_singular_and_indefinite_matrices():
  """A singular matrix has det 0 and slogdet (0, -inf), and solve and inverse refuse it; cholesky refuses a matrix that is not
  positive-definite and names the first leading minor that is not; bad shapes and dtypes name what is wrong."""
  singular = Tensor([[1.0, 2.0], [2.0, 4.0]])
  assert singular.det().item() == 0 and singular.slogdet()[1].item() == -np.inf
  with pytest.raises(LinAlgError, match="inverse: the matrix of shape \\(2, 2\\) is singular"): singular.inverse()
  with pytest.raises(LinAlgError, match="solve: .* singular"): singular.solve(Tensor.ones(2, 1))
  with pytest.raises(LinAlgError, match="leading minor of order 2"): Tensor([[1.0, 0.0], [0.0, -1.0]]).cholesky()
  with pytest.raises(RuntimeError, match="square matrices, got shape \\(2, 3\\)"): Tensor.ones(2, 3).det()
  with pytest.raises(RuntimeError, match="floating point tensor, got dtypes.int32"): Tensor([[1, 2], [3, 4]]).inverse()
  with pytest.raises(RuntimeError, match="do not fit A X = B"): Tensor.eye(2).solve(Tensor.ones(3, 1))
  assert Tensor.zeros(0, 0).det().item() == 1 and Tensor.zeros(2, 0, 0).inverse().shape == (2, 0, 0)
  assert Tensor([[2.0, 1.0], [1.0, 3.0]], dtype=dtypes.float16).det().dtype == dtypes.float16


def test_det_solve_inverse_cholesky_gradients_match_pytorch():
  """Values and gradients (of a weighted sum, so every entry's slope counts) against torch.linalg's, float64; cholesky's
  slope is symmetric as PyTorch's even where the input's upper triangle differs from its lower (which is not read)."""
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(5)
  a, b = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 3))
  spd = a @ a.transpose(0, 2, 1) + 4 * np.eye(4) + np.triu(rng.standard_normal((4, 4)), 1)
  cases = [(Tensor.det, torch.linalg.det, (a,)), (lambda x: x.slogdet()[1], lambda x: torch.linalg.slogdet(x)[1], (a,)),
           (Tensor.logdet, torch.logdet, (spd,)), (Tensor.inverse, torch.linalg.inv, (a,)), (Tensor.solve, torch.linalg.solve, (a, b)),
           (Tensor.cholesky, torch.linalg.cholesky, (spd,))]
  for ours, theirs, arrays in cases:
    xs, ts = [Tensor(x, requires_grad=True) for x in arrays], [torch.tensor(x, requires_grad=True) for x in arrays]
    out, ref = ours(*xs), theirs(*ts)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = rng.standard_normal(out.shape)
    (out * Tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts): np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-11)
