"""The import contracts of `.importlinter` (run by `make lint`) hold, catch a wrong-way import, and
cover every module of the library."""

from __future__ import annotations

import configparser
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
        ("protocol/handler.py", "import turnstile.store.s3", "The protocol reaches jobs and storage only"),
        ("protocol/lock.py", "import turnstile.jobs.emr", "The protocol reaches jobs and storage only"),
        ("names/paths.py", "import turnstile.protocol.lock", "Layers"),
        ("config/cascade.py", "import turnstile.store.gcs", "The core"),
        ("store/s3.py", "import turnstile.config.settings", "Layers"),
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


def modules(tree: Path) -> set[str]:
    """Every module of the library under `tree` (shared/turnstile), dotted."""
    found = set()
    for path in tree.rglob("*.py"):
        parts = path.relative_to(tree.parent).with_suffix("").parts
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found - {"turnstile"}


def contracts(config: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(config)
    return parser


def _listed(parser: configparser.ConfigParser, section: str, key: str) -> list[str]:
    return [line.strip() for line in parser[section][key].splitlines() if line.strip()]


def layers(parser: configparser.ConfigParser) -> list[str]:
    """The layers contract's packages and modules, dotted under its container."""
    (container,) = _listed(parser, "importlinter:contract:layers", "containers")
    names = []
    for line in _listed(parser, "importlinter:contract:layers", "layers"):
        names += [f"{container}.{name.strip()}" for name in line.replace("|", ":").split(":")]
    return names


def outside_every_layer(tree: Path, config: Path) -> list[str]:
    placed = layers(contracts(config))
    return sorted(
        module
        for module in modules(tree)
        if not any(module == layer or module.startswith(layer + ".") for layer in placed)
    )


def test_every_module_sits_in_a_layer() -> None:
    assert outside_every_layer(ROOT / "shared" / "turnstile", ROOT / ".importlinter") == []


def test_a_module_outside_every_layer_is_found(tree: Path) -> None:
    (tree / "shared" / "turnstile" / "newcomer.py").write_text('"""A module no contract names."""\n')
    found = outside_every_layer(tree / "shared" / "turnstile", tree / ".importlinter")
    assert found == ["turnstile.newcomer"]


def forbidden_by(contract: str) -> set[str]:
    parser = contracts(ROOT / ".importlinter")
    return set(_listed(parser, f"importlinter:contract:{contract}", "forbidden_modules"))


def test_the_protocol_may_reach_no_adapter_but_the_ports() -> None:
    """Each job runner and store adapter, today's and tomorrow's, is forbidden to the protocol."""
    forbidden = set(
        _listed(
            contracts(ROOT / ".importlinter"), "importlinter:contract:protocol-ports", "forbidden_modules"
        )
    )
    adapters = {
        module
        for module in modules(ROOT / "shared" / "turnstile")
        if module.startswith(("turnstile.jobs.", "turnstile.store."))
        and module not in {"turnstile.jobs.port", "turnstile.store.port"}
    }
    assert adapters - forbidden == set()


def test_the_core_may_reach_no_store_adapter() -> None:
    forbidden = forbidden_by("core-ports")
    adapters = {
        module
        for module in modules(ROOT / "shared" / "turnstile")
        if module.startswith("turnstile.store.") and module != "turnstile.store.port"
    }
    assert adapters - forbidden == set()
