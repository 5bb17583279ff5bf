"""The package as pip sees it: a wheel built from pyproject.toml declares the core dependencies and
the extras, holds `turnstile` and not the development tooling, installs with pip, and imports from
where pip put it; requirements.txt pins exactly what pyproject.toml declares, within its ranges;
each extra covers what the code it serves imports."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.dependencies import canonical, unprovided
from turnstile.deploy import importgraph

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "shared"
EXTRAS = ("function", "job", "aws", "cli", "dev")


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--no-index", "-q"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip wheel` of a copy of the checkout's package sources (a build writes into its source tree),
    offline: no index, the installed setuptools instead of an isolated build environment."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source)
    shutil.copytree(SHARED, source / "shared", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source))
    (built,) = (work / "dist").glob("turnstile-*.whl")
    return built


def _metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode())


def _declared(metadata: Message) -> dict[str | None, list[Requirement]]:
    """Requires-Dist by extra (None: the core), as the wheel states them."""
    by_extra: dict[str | None, list[Requirement]] = {None: [], **{extra: [] for extra in EXTRAS}}
    for text in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(text)
        extra = next(
            (e for e in EXTRAS if requirement.marker and requirement.marker.evaluate({"extra": e})), None
        )
        by_extra[extra].append(requirement)
    return by_extra


def _with_self_references(
    by_extra: dict[str | None, list[Requirement]], extra: str | None
) -> list[Requirement]:
    """The requirements `pip install turnstile[extra]` resolves: the core, the extra, and the extras
    it names through `turnstile[...]`, other distributions only."""
    found = list(by_extra[None])
    todo = [extra] if extra else []
    done: set[str] = set()
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        for requirement in by_extra[name]:
            if canonical(requirement.name) == "turnstile":
                todo.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def _pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file, by canonical name."""
    pins = {}
    for line in path.read_text().splitlines():
        text = line.split("#")[0].strip()
        if text:
            requirement = Requirement(text)
            (spec,) = requirement.specifier
            assert spec.operator == "==", f"{path.name}: {text!r} is not pinned with =="
            pins[canonical(requirement.name)] = spec.version
    return pins


def test_wheel_holds_the_library_and_not_the_tooling(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert packages == {"turnstile"}
    assert {"turnstile/entrypoints/entry.py", "turnstile/spark/main.py", "turnstile/py.typed"} <= set(names)
    # The console's templates and its stylesheet and script: `turnstile ui` serves them from the package.
    console = {
        "turnstile/ui/templates/table.html",
        "turnstile/ui/static/console.css",
        "turnstile/ui/static/console.js",
    }
    assert console <= set(names)
    assert not [n for n in names if "__pycache__" in n or re.search(r"/(bench|simulation)/|/demo\.py$", n)]


def test_wheel_metadata_declares_the_core_and_the_extras(wheel: Path) -> None:
    metadata = _metadata(wheel)
    assert metadata["Name"] == "turnstile"
    assert sorted(metadata.get_all("Provides-Extra") or []) == sorted(EXTRAS)
    by_extra = _declared(metadata)
    core = {canonical(r.name) for r in by_extra[None]}
    assert {"google-cloud-storage", "pydantic", "python-json-logger"} <= core
    assert not {"pyspark", "functions-framework", "typer", "pytest"} & core
    assert "functions-framework" in {canonical(r.name) for r in by_extra["function"]}
    assert "pyspark" in {canonical(r.name) for r in by_extra["job"]}
    assert "typer" in {canonical(r.name) for r in _with_self_references(by_extra, "cli")}
    assert "pytest" in {canonical(r.name) for r in _with_self_references(by_extra, "dev")}
    for extra in (None, *EXTRAS):
        for requirement in _with_self_references(by_extra, extra):
            assert requirement.specifier, f"{requirement} ({extra or 'core'}) has no version range"


def test_pip_installs_the_wheel_and_it_imports_from_there(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    _pip("install", "--no-deps", "--target", str(target), str(wheel))
    prelude = (  # only the pip-installed turnstile: no shared/, no editable install
        "import sys, os\n"
        "sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or '.', 'turnstile'))]\n"
        f"sys.path.insert(0, {str(target)!r})\n"
    )
    code = (
        "import importlib.metadata as md, turnstile.entrypoints.entry, turnstile.names.paths\n"
        "print(turnstile.entrypoints.entry.__file__)\n"
        "print(sorted(md.metadata('turnstile').get_all('Provides-Extra')))\n"
        "import importlib.util\n"
        "print(importlib.util.find_spec('turnstile_dev'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    where, extras, dev = done.stdout.splitlines()
    assert Path(where).is_relative_to(target)
    assert extras == str(sorted(EXTRAS))
    assert dev == "None"


def test_requirements_pin_exactly_what_is_declared_within_its_range(wheel: Path) -> None:
    by_extra = _declared(_metadata(wheel))
    declared = {
        canonical(r.name): r for extra in (None, *EXTRAS) for r in _with_self_references(by_extra, extra)
    }
    pins = _pins(ROOT / "requirements.txt")
    assert set(pins) == set(declared), (
        f"pinned, not declared: {sorted(set(pins) - set(declared))}; "
        f"declared, not pinned: {sorted(set(declared) - set(pins))}"
    )
    outside = {
        name: (pins[name], str(r.specifier)) for name, r in declared.items() if pins[name] not in r.specifier
    }
    assert not outside, f"pins outside their declared ranges: {outside}"


def test_pinned_versions_are_the_installed_ones() -> None:
    installed = {name: md.version(name) for name in _pins(ROOT / "requirements.txt")}
    assert installed == _pins(ROOT / "requirements.txt")


def test_function_requirements_are_the_core_and_the_function_extra(wheel: Path) -> None:
    wanted = {canonical(r.name) for r in _with_self_references(_declared(_metadata(wheel)), "function")}
    deployed = _pins(ROOT / "functions" / "requirements.txt")
    assert set(deployed) == wanted
    locked = _pins(ROOT / "requirements.txt")
    assert {name: locked[name] for name in deployed} == deployed


def _sources(path: Path) -> set[Path]:
    """The Python files of a folder, or the module `path` names (`x` may be `x/` or `x.py`)."""
    if path.is_dir():
        return set(path.rglob("*.py"))
    return {path if path.suffix == ".py" else path.with_suffix(".py")}


@pytest.mark.parametrize(
    ("extra", "entry_points"),
    [
        ("function", ["functions/main.py"]),
        ("job", ["shared/turnstile/spark/main.py"]),
        (
            "cli",
            [
                "shared/turnstile/cli",
                "shared/turnstile/local/stack.py",
                "shared/turnstile/jobs/local_worker.py",
            ],
        ),
        ("dev", ["shared/turnstile_dev", "tests"]),
    ],
)
def test_each_extra_covers_what_its_code_imports(wheel: Path, extra: str, entry_points: list[str]) -> None:
    names = {canonical(r.name) for r in _with_self_references(_declared(_metadata(wheel)), extra)}
    starts = {file for entry in entry_points for file in _sources(ROOT / entry)}
    files = starts | importgraph.reached(starts, SHARED, "turnstile")
    missing = unprovided(
        importgraph.third_party(files, SHARED, ["turnstile", "turnstile_dev", "tests"]), names
    )
    assert not missing, f"imported under {entry_points} but not provided by turnstile[{extra}]: {missing}"
