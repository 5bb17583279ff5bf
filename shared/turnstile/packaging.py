"""Build what the Terraform deployment uploads: the functions' source and the Dataproc job's files.

    python -m turnstile.packaging [BUILD_DIR] [--scala 2.13] [--no-jars] [--no-deps]

BUILD_DIR (default `build/`) receives:

    function/            the Cloud Functions source folder: main.py and requirements.txt from
                         functions/, and beside them the turnstile modules main.py reaches through
                         its imports, so `import turnstile` works in the cloud without path tricks
    function.zip         that folder zipped (Terraform uploads it; the buildpack installs the
                         requirements, which hold only the functions' dependencies, no pyspark)
    job/main.py          the PySpark main file (Dataproc's main_python_file_uri)
    job/turnstile.zip    for python_file_uris: the turnstile modules the job's main file reaches
    job/deps.zip         the job's dependencies (pydantic, google-cloud-storage at the versions of
                         requirements.txt) installed for the Dataproc runtime's Python, for
                         archive_uris (see turnstile.spark.dependencies); needs PyPI, or --no-deps
    job/jars/            the Iceberg Spark runtime for the Dataproc runtime's Scala version and the
                         relocated Jackson classes it needs (see turnstile.jobs.local_spark)

Each artefact holds only the modules its entry point imports (`turnstile.importgraph`): no CLI,
no packaging, no Spark code in the function; none of the protocol in the job. The development
tooling (`turnstile_dev`: bench, simulation, demo) lives outside the package and is never reached.

The zips are deterministic (sorted entries, fixed timestamps and modes): unchanged code gives
byte-identical archives, so `terraform plan` shows no change and the function is not rebuilt.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from turnstile import importgraph
from turnstile.errors import SettingsError
from turnstile.jobs import local_spark
from turnstile.spark.dependencies import SHIPPED_DIR

_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
ROOT = Path(__file__).resolve().parents[2]
"""The repository root (shared/turnstile/packaging.py -> the checkout)."""

PACKAGE_DIR = Path(__file__).resolve().parent
FUNCTIONS_DIR = ROOT / "functions"
JOB_MAIN = PACKAGE_DIR / "spark" / "main.py"
DEFAULT_BUILD = Path("build")

FUNCTION_FILES = ("main.py", "requirements.txt")
"""What functions/ contributes to the function source folder."""

SCALA_VERSIONS = ("2.12", "2.13")
DEFAULT_SCALA = "2.13"
"""Dataproc Serverless runtime 2.x (Spark 3.5, Scala 2.13); runtime 1.2 would need 2.12."""

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Built:
    """Paths of everything `build` wrote."""

    function_dir: Path
    function_zip: Path
    job_main: Path
    job_package: Path
    jars: tuple[Path, ...]
    job_dependencies: Path | None = None


def reached_files(*starts: Path, package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The package's source files that `starts` import, directly or not, sorted, relative to the
    package's parent (what an artefact whose entry points are `starts` needs)."""
    root = package_dir.parent
    files = importgraph.reached(starts, root, package_dir.name)
    return sorted(path.relative_to(root) for path in files)


def deterministic_zip(entries: Iterable[tuple[str, Path | bytes]], target: Path) -> Path:
    """Write `(name in archive, file or content)` pairs to `target`, sorted by name, with fixed
    times and modes, through a temporary file renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        for name, source in sorted(entries, key=lambda entry: entry[0]):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, source if isinstance(source, bytes) else source.read_bytes())
    tmp.replace(target)
    return target


def _fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def build_function(out: Path, functions_dir: Path = FUNCTIONS_DIR) -> tuple[Path, Path]:
    """`out/function/` (main.py, requirements.txt, the turnstile modules main.py reaches) and
    `out/function.zip`."""
    folder = _fresh_dir(out / "function")
    entries: list[tuple[str, Path | bytes]] = []
    for name in FUNCTION_FILES:
        source = functions_dir / name
        if not source.is_file():
            raise SettingsError(f"{source} is missing; the function source needs functions/{name}")
        shutil.copy2(source, folder / name)
        entries.append((name, source))
    for rel in reached_files(functions_dir / "main.py"):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PACKAGE_DIR.parent / rel, target)
        entries.append((rel.as_posix(), PACKAGE_DIR.parent / rel))
    return folder, deterministic_zip(entries, out / "function.zip")


def build_job(out: Path) -> tuple[Path, Path]:
    """`out/job/main.py` and `out/job/turnstile.zip` (the modules the job's main file reaches,
    importable from the zip).

    turnstile is a namespace package (no `__init__.py`), which zipimport does not find; the zip
    gets an empty `turnstile/__init__.py` so Python imports it from python_file_uris."""
    job = out / "job"
    job.mkdir(parents=True, exist_ok=True)
    main = job / "main.py"
    shutil.copy2(JOB_MAIN, main)
    entries: list[tuple[str, Path | bytes]] = [
        (rel.as_posix(), PACKAGE_DIR.parent / rel) for rel in reached_files(JOB_MAIN)
    ]
    init = f"{PACKAGE_DIR.name}/__init__.py"
    if init not in {name for name, _ in entries}:
        entries.append((init, b""))
    return main, deterministic_zip(entries, job / "turnstile.zip")


# -- the job's dependencies ----------------------------------------------------------------------

JOB_DEPENDENCIES = ("pydantic", "google-cloud-storage")
"""What the job imports beyond PySpark and the standard library (their own dependencies follow);
tests/unit/test_packaging.py checks this against the job's imports."""

DATAPROC_RUNTIME = "2.2"
"""The Dataproc Serverless runtime the deployment pins (terraform's dataproc_runtime_version)."""

DATAPROC_PYTHON = "3.12"
"""Python of that runtime (2.2: Spark 3.5.1, Scala 2.13, Java 17, Python 3.12, from Google's runtime
release notes): the job's dependencies are installed for it."""

DATAPROC_PLATFORM = "manylinux2014_x86_64"
JOB_DEPS_ARCHIVE = "deps.zip"
JOB_DEPS_FRAGMENT = SHIPPED_DIR
"""`gs://.../deps.zip#turnstile_deps`: the folder Spark extracts the archive into."""

Pip = Callable[[list[str]], None]


def _pip(arguments: list[str]) -> None:
    subprocess.run([sys.executable, "-m", "pip", *arguments], check=True)


def job_dependency_pins(requirements: Path = ROOT / "requirements.txt") -> list[str]:
    """`name==version` of each of JOB_DEPENDENCIES, as requirements.txt pins it."""
    pins: dict[str, str] = {}
    for line in requirements.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if "==" in spec:
            pins[re.sub(r"[-_.]+", "-", spec.split("==", 1)[0].strip().lower())] = spec
    missing = [name for name in JOB_DEPENDENCIES if name not in pins]
    if missing:
        raise SettingsError(f"{requirements} pins no version of {', '.join(missing)}; the job ships them")
    return [pins[name] for name in JOB_DEPENDENCIES]


def build_job_dependencies(out: Path, pip: Pip = _pip) -> Path:
    """`out/job/deps.zip`: JOB_DEPENDENCIES and theirs, installed for the runtime's Python and
    platform (wheels only: nothing is compiled here), entries at the archive's root."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        arguments = [
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            str(site),
            "--platform",
            DATAPROC_PLATFORM,
            "--python-version",
            DATAPROC_PYTHON,
            "--implementation",
            "cp",
            "--only-binary=:all:",
            *job_dependency_pins(),
        ]
        try:
            pip(arguments)
        except (subprocess.CalledProcessError, OSError) as exc:
            raise SettingsError(
                f"could not install the job's dependencies for Python {DATAPROC_PYTHON} ({exc}); "
                "check access to PyPI, or build with --no-deps and stage deps.zip yourself"
            ) from exc
        files = [
            path
            for path in sorted(site.rglob("*"))
            if path.is_file()
            and not _SKIPPED_DIRS & set(path.parts)
            and not path.name.endswith(_SKIPPED_SUFFIXES)
        ]
        if not files:
            raise SettingsError(f"pip installed nothing into {site}; the job's dependencies are missing")
        entries: list[tuple[str, Path | bytes]] = [(p.relative_to(site).as_posix(), p) for p in files]
        return deterministic_zip(entries, out / "job" / JOB_DEPS_ARCHIVE)


def iceberg_runtime_jar(scala: str) -> Path:
    """The Iceberg Spark 3.5 runtime for `scala` from the snowpark-connect-deps-iceberg package."""
    if scala not in SCALA_VERSIONS:
        raise SettingsError(f"Scala {scala!r} is not one of {', '.join(SCALA_VERSIONS)}")
    spec = find_spec("snowpark_connect_deps_iceberg")
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError(
            "Python package snowpark_connect_deps_iceberg is not installed; pip install -r requirements.txt"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    pattern = re.compile(rf"iceberg-spark-runtime-3\.5_{re.escape(scala)}-(\d[\w.]*)\.jar")
    found = sorted(p for p in folder.glob("*.jar") if pattern.fullmatch(p.name))
    if not found:
        raise SettingsError(f"no Iceberg Spark runtime for Scala {scala} in {folder}")
    return found[-1]


def build_jars(out: Path, scala: str = DEFAULT_SCALA) -> tuple[Path, ...]:
    """`out/job/jars/`: the Iceberg runtime for `scala` and the relocated Jackson jar.

    The relocated Jackson classes do not depend on Scala, so the jar built for local Spark serves
    Dataproc too; it is (re)built only when missing or stale."""
    folder = out / "job" / "jars"
    folder.mkdir(parents=True, exist_ok=True)
    runtime = iceberg_runtime_jar(scala)
    jackson = local_spark.ensure_jars(folder)[-1]
    wanted = {runtime.name, jackson.name}
    for stale in folder.glob("*.jar"):
        if stale.name not in wanted:
            stale.unlink()
    staged = folder / runtime.name
    if not staged.is_file() or staged.stat().st_size != runtime.stat().st_size:
        shutil.copy2(runtime, staged)
    return tuple(sorted((staged, jackson)))


def build(
    out: Path = DEFAULT_BUILD, *, scala: str = DEFAULT_SCALA, with_jars: bool = True, with_deps: bool = True
) -> Built:
    """Everything the Terraform configuration reads from `out`."""
    function_dir, function_zip = build_function(out)
    job_main, job_package = build_job(out)
    jars = build_jars(out, scala) if with_jars else ()
    deps = build_job_dependencies(out) if with_deps else None
    return Built(function_dir, function_zip, job_main, job_package, jars, deps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile.packaging",
        description="Build the function source and the Dataproc job files the Terraform deployment uploads.",
    )
    parser.add_argument("build_dir", nargs="?", type=Path, default=DEFAULT_BUILD)
    parser.add_argument(
        "--scala", choices=SCALA_VERSIONS, default=DEFAULT_SCALA, help="Scala of the Dataproc runtime"
    )
    parser.add_argument("--no-jars", action="store_true", help="skip the Iceberg jars (no Java needed)")
    parser.add_argument("--no-deps", action="store_true", help="skip job/deps.zip (no PyPI access needed)")
    args = parser.parse_args(argv)
    try:
        built = build(
            args.build_dir, scala=args.scala, with_jars=not args.no_jars, with_deps=not args.no_deps
        )
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in (built.function_zip, built.job_main, built.job_package, *built.jars):
        print(path)
    if built.job_dependencies is not None:
        print(built.job_dependencies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
