"""The import walk that decides what each artefact holds, on a small package tree of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstile.deploy import importgraph


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _write(
        tmp_path,
        {
            "entry.py": "from pkg.sub import leaf\nimport requests\n",
            "pkg/top.py": "import json\n",
            "pkg/sub/__init__.py": "from pkg import top\n",
            "pkg/sub/leaf.py": "from . import sibling\nfrom ..other import thing\n",
            "pkg/sub/sibling.py": "def late():\n    from pkg import lazy  # noqa\n",
            "pkg/other.py": "import subprocess\nsubprocess.run(['python', '-m', 'pkg.unreached'])\n",
            "pkg/lazy.py": "from google.cloud import storage\n",
            "pkg/unreached.py": "import pyspark\n",
            "pkg/tooling.py": "import matplotlib\n",
            "dev/tool.py": "import pkg.tooling\n",
        },
    )


def _rel(paths: set[Path], root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in paths}


def test_reached_follows_absolute_relative_and_late_imports_with_their_packages(tree: Path) -> None:
    reached = importgraph.reached([tree / "entry.py"], tree, "pkg")
    assert _rel(reached, tree) == {
        "pkg/top.py",  # imported by pkg/sub/__init__.py, which importing pkg.sub.leaf runs
        "pkg/sub/__init__.py",
        "pkg/sub/leaf.py",
        "pkg/sub/sibling.py",  # from . import sibling
        "pkg/other.py",  # from ..other import thing
        "pkg/lazy.py",  # imported inside a function
    }


def test_modules_named_only_in_strings_or_only_by_other_packages_are_not_reached(tree: Path) -> None:
    reached = _rel(importgraph.reached([tree / "entry.py"], tree, "pkg"), tree)
    assert "pkg/unreached.py" not in reached
    assert "pkg/tooling.py" not in reached
    assert _rel(importgraph.reached([tree / "dev" / "tool.py"], tree, "pkg"), tree) == {"pkg/tooling.py"}


def test_third_party_names_the_other_distributions_modules(tree: Path) -> None:
    files = {tree / "entry.py"} | importgraph.reached([tree / "entry.py"], tree, "pkg")
    assert importgraph.third_party(files, tree, ["pkg"]) == {"requests", "google"}


def test_imported_names_resolve_relative_imports(tree: Path) -> None:
    names = importgraph.imported_names(tree / "pkg" / "sub" / "leaf.py", tree)
    assert {"pkg.sub", "pkg.sub.sibling", "pkg.other", "pkg.other.thing"} <= names


def test_module_file_finds_modules_and_packages(tree: Path) -> None:
    assert importgraph.module_file("pkg.sub", tree) == tree / "pkg" / "sub" / "__init__.py"
    assert importgraph.module_file("pkg.top", tree) == tree / "pkg" / "top.py"
    assert importgraph.module_file("pkg.top.name", tree) is None
