"""nox sessions mirroring tox.ini: `nox` runs core, torch and lint, `nox -s core -- -k name` passes arguments on to pytest.

Plugin sessions (cpu, opencl, cuda, metal, amd) are added here, and in tox.ini, as plugins/tinyspec-* land.
"""
import nox

nox.needs_version = ">=2024.4.15"
nox.options.sessions = ["core", "torch", "lint"]
nox.options.reuse_venv = "yes"  # keep a session's virtualenv between runs; `nox -R`/`--no-reuse-existing-virtualenvs` rebuilds
nox.options.error_on_missing_interpreters = True

RUFF = "ruff>=0.17,<0.18"  # same range as tox.ini

@nox.session
def core(session: nox.Session) -> None:
  """Core tests against tinyspec installed (not editable) from ./core with the test extra, spec verifier on."""
  session.install("./core[test]")  # pip rebuilds and reinstalls a local directory on every run, so the code is current
  session.run("pytest", "core/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})

@nox.session
def torch(session: nox.Session) -> None:
  """The core tests again with PyTorch and safetensors installed, so every comparison with them runs too."""
  session.install("./core[test]", "torch==2.13.0", "safetensors")
  session.run("pytest", "core/tests", *session.posargs, env={"TINYSPEC_VERIFY": "1"})

@nox.session
def lint(session: nox.Session) -> None:
  """ruff check core bench (config: [tool.ruff] in pyproject.toml)."""
  session.install(RUFF)
  session.run("ruff", "check", "core", "bench", *session.posargs)
