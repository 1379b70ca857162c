"""docs/writing-a-plugin.md shows the whole plugin template as code blocks, each under a `<!-- file: PATH -->` marker.
These tests hold the doc to the code: every block equals its file in examples/plugin-template, and a plugin built from
the blocks alone (renamed, installed with pip into a directory of its own) passes the whole conformance suite."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC, TEMPLATE = ROOT / "docs" / "writing-a-plugin.md", ROOT / "examples" / "plugin-template"
BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```\n", re.S)
NEEDED = {"pyproject.toml", "src/tinyspec_ctemplate/plugin.py", "src/tinyspec_ctemplate/renderer.py",
          "src/tinyspec_ctemplate/compiler.py", "src/tinyspec_ctemplate/runtime.py"}

def doc_files() -> dict[str, str]:
  return dict(BLOCK.findall(DOC.read_text(encoding="utf-8")))

def test_the_doc_shows_every_file_of_the_template_as_it_is():
  files = doc_files()
  assert NEEDED <= set(files), f"docs/writing-a-plugin.md lacks blocks for {sorted(NEEDED - set(files))}"
  for path, text in files.items():
    assert text == (TEMPLATE / path).read_text(encoding="utf-8"), f"the doc's {path} differs from examples/plugin-template/{path}"

def renamed(text: str) -> str:
  """The template's names replaced by the new plugin's, as the template's README says to do (device CC stays)."""
  return text.replace("tinyspec_ctemplate", "tinyspec_fromdocs").replace("tinyspec-c-template", "tinyspec-fromdocs")

@pytest.mark.skipif(shutil.which(os.environ.get("CC") or "cc") is None, reason="no C compiler (cc or $CC) to build the doc's plugin")
def test_a_plugin_written_from_the_doc_passes_the_conformance_suite(tmp_path):
  src, site = tmp_path / "tinyspec-fromdocs", tmp_path / "site"
  for path, text in doc_files().items():
    (src / renamed(path)).parent.mkdir(parents=True, exist_ok=True)
    (src / renamed(path)).write_text(renamed(text), encoding="utf-8")
  (src / "README.md").write_text("A plugin built from docs/writing-a-plugin.md's code blocks.\n")
  pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(site), str(src)],
                       capture_output=True, text=True)
  assert pip.returncode == 0, pip.stderr[-3000:]
  # only this plugin's entry points load (an installed template provides CC too), and its package is found first
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), "TINYSPEC_PLUGINS": "tinyspec-fromdocs"}
  probe = "import tinyspec_fromdocs; print(tinyspec_fromdocs.__file__)"
  where = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
  assert where.stdout.startswith(str(site)), where.stdout + where.stderr
  run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "tinyspec.conformance", "--tinyspec-device=CC", "-q", "-p", "no:cacheprovider",
                        "-o", "addopts=", "-rfE"], env=env, capture_output=True, text=True, cwd=tmp_path, timeout=1500)
  summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
  assert run.returncode == 0 and " passed" in summary and "failed" not in summary, run.stdout[-4000:] + run.stderr[-2000:]
