"""The import contracts of `.importlinter` (run by `make lint`) hold, and catch a wrong-way import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# `turnstile` is a namespace package and the checkout's own `shared/` is on every path of this
# virtualenv (an editable install): the copy must be the only `turnstile` the linter sees.
LINT = """
import sys
sys.path = [sys.argv[1]] + [p for p in sys.path if not p.rstrip("/").endswith("/shared")]
from importlinter import cli
sys.exit(cli.lint_imports(config_filename=sys.argv[2], no_cache=True))
"""


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LINT, str(tree / "shared"), str(tree / ".importlinter")],
        cwd=tree,
        env=os.environ | {"PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "shared" / "turnstile", tmp_path / "shared" / "turnstile")
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


def test_the_library_keeps_every_contract(tree: Path) -> None:
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("protocol/decide.py", "import turnstile.spark.applier", "Layers"),
        ("jobs/local.py", "import turnstile.local.stack", "Layers"),
        ("spark/reading.py", "import turnstile.jobs.dataproc", "The Spark job imports only"),
        ("protocol/handler.py", "import turnstile.store.gcs", "The protocol reaches jobs and storage only"),
        ("paths.py", "import turnstile.protocol.lock", "The core"),
    ],
)
def test_a_planted_wrong_way_import_breaks_its_contract(
    tree: Path, module: str, planted: str, contract: str
) -> None:
    path = tree / "shared" / "turnstile" / module
    path.write_text(path.read_text() + f"\n{planted}  # planted\n")
    done = lint(tree)
    assert done.returncode != 0
    broken = [line for line in done.stdout.splitlines() if "BROKEN" in line or contract in line]
    assert any(contract in line for line in broken), done.stdout
