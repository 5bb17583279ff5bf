"""Build what a deployment uploads: the functions' source and the job's files, for Google Cloud
(what the Terraform deployment reads) or for AWS (docs/DEPLOY-AWS.md).

    python -m turnstile.deploy.packaging [BUILD_DIR] [--scala 2.13] [--python-version 3.12]
                                         [--no-jars] [--no-deps]
    python -m turnstile.deploy.packaging [BUILD_DIR] --cloud aws [--no-deps]

BUILD_DIR (default `build/`) receives:

    function/            the Cloud Functions source folder: main.py and requirements.txt from
                         functions/, and beside them the turnstile modules main.py reaches through
                         its imports, so `import turnstile` works in the cloud without path tricks
    function.zip         that folder zipped (Terraform uploads it; the buildpack installs the
                         requirements, which hold only the functions' dependencies, no pyspark)
    job/main.py          the PySpark main file (Dataproc's main_python_file_uri)
    job/driver.py        the warm driver's main file (entrypoints/spool_driver.py, DRIVER_MAIN_URI)
    job/turnstile.zip    for python_file_uris: the turnstile modules the two main files reach
    job/deps.zip         the job's dependencies (pydantic, google-cloud-storage, python-json-logger
                         at the versions of requirements.txt) installed for the Dataproc runtime's
                         Python (or --python-version's), for archive_uris (see
                         turnstile.spark.dependencies); needs PyPI, or --no-deps
    job/jars/            the Iceberg Spark runtime for the Dataproc runtime's Scala version and the
                         relocated Jackson classes it needs (see turnstile.jobs.local_spark)

With `--cloud aws`, BUILD_DIR/aws/ receives instead:

    lambda/              the Lambda functions' package: aws_lambda.py and requirements-aws.txt from
                         functions/, the turnstile modules aws_lambda.py reaches, and (unless
                         --no-deps) those requirements installed for the Lambda runtime's Python
    lambda.zip           that folder zipped: the deployment package of both functions
    job/main.py          the EMR job's main file (spark/main_aws.py: S3 stores), JOB_MAIN_URI
    job/driver.py        the warm driver's main file (entrypoints/spool_driver.py, run with
                         `--store s3`), DRIVER_MAIN_URI
    job/turnstile.zip    the turnstile modules the two reach (the S3 store among them), JOB_PYTHON_FILE_URIS

Each artefact holds only the modules its entry point imports (`turnstile.deploy.importgraph`): no CLI,
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
from pathlib import Path

from turnstile.core.errors import SettingsError
from turnstile.deploy import importgraph
from turnstile.deploy.jars import DEFAULT_SCALA, SCALA_VERSIONS, build_jars
from turnstile.spark.dependencies import SHIPPED_DIR

_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
ROOT = Path(__file__).resolve().parents[3]
"""The repository root (shared/turnstile/deploy/packaging.py -> the checkout)."""

PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The turnstile package (shared/turnstile)."""
FUNCTIONS_DIR = ROOT / "functions"
JOB_MAIN = PACKAGE_DIR / "spark" / "main.py"
DRIVER_MAIN = PACKAGE_DIR / "entrypoints" / "spool_driver.py"
AWS_JOB_MAIN = PACKAGE_DIR / "spark" / "main_aws.py"
DEFAULT_BUILD = Path("build")

FUNCTION_FILES = ("main.py", "requirements.txt")
"""What functions/ contributes to the function source folder."""

LAMBDA_FILES = ("aws_lambda.py", "requirements-aws.txt")
"""What functions/ contributes to the Lambda package (its handlers, and what to install beside them)."""

LAMBDA_PYTHON = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"
"""The Lambda runtime the package's dependencies are installed for (python3.12 on x86_64; for arm64
functions build with `--platform manylinux2014_aarch64` yourself)."""

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class BuiltAws:
    """Paths of everything `build_aws` wrote."""

    lambda_dir: Path
    lambda_zip: Path
    job_main: Path
    job_package: Path
    job_driver: Path


@dataclass(frozen=True)
class Built:
    """Paths of everything `build` wrote."""

    function_dir: Path
    function_zip: Path
    job_main: Path
    job_package: Path
    jars: tuple[Path, ...]
    job_dependencies: Path | None = None
    job_driver: Path | None = None


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


def _fill_source(folder: Path, functions_dir: Path, files: tuple[str, ...], entry: str) -> None:
    """Copy `files` of functions/ into `folder`, and beside them the turnstile modules `entry` reaches."""
    for name in files:
        source = functions_dir / name
        if not source.is_file():
            raise SettingsError(f"{source} is missing; the function source needs functions/{name}")
        shutil.copy2(source, folder / name)
    for rel in reached_files(functions_dir / entry):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PACKAGE_DIR.parent / rel, target)


def _zip_folder(folder: Path, target: Path) -> Path:
    files = [
        path
        for path in folder.rglob("*")
        if path.is_file()
        and not _SKIPPED_DIRS & set(path.parts)
        and not path.name.endswith(_SKIPPED_SUFFIXES)
    ]
    return deterministic_zip([(p.relative_to(folder).as_posix(), p) for p in files], target)


def build_function(out: Path, functions_dir: Path = FUNCTIONS_DIR) -> tuple[Path, Path]:
    """`out/function/` (main.py, requirements.txt, the turnstile modules main.py reaches) and
    `out/function.zip`."""
    folder = _fresh_dir(out / "function")
    _fill_source(folder, functions_dir, FUNCTION_FILES, "main.py")
    return folder, _zip_folder(folder, out / "function.zip")


def build_job(out: Path, main_file: Path = JOB_MAIN, driver_file: Path | None = None) -> tuple[Path, Path]:
    """`out/job/main.py` (a copy of `main_file`) and `out/job/turnstile.zip` (the modules the job's
    main file reaches, importable from the zip). With `driver_file`, `out/job/driver.py` too (the
    warm driver's main file, DRIVER_MAIN_URI), and the zip holds what it reaches as well.

    turnstile is a namespace package (no `__init__.py`), which zipimport does not find; the zip
    gets an empty `turnstile/__init__.py` so Python imports it from python_file_uris."""
    job = out / "job"
    job.mkdir(parents=True, exist_ok=True)
    main = job / "main.py"
    shutil.copy2(main_file, main)
    starts = [main_file]
    if driver_file is not None:
        shutil.copy2(driver_file, job / "driver.py")
        starts.append(driver_file)
    entries: list[tuple[str, Path | bytes]] = [
        (rel.as_posix(), PACKAGE_DIR.parent / rel) for rel in reached_files(*starts)
    ]
    init = f"{PACKAGE_DIR.name}/__init__.py"
    if init not in {name for name, _ in entries}:
        entries.append((init, b""))
    return main, deterministic_zip(entries, job / "turnstile.zip")


# -- the job's dependencies ----------------------------------------------------------------------

JOB_DEPENDENCIES = ("pydantic", "google-cloud-storage", "python-json-logger")
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


def install_wheels(
    pip: Pip, target: Path, requirements: list[str], *, python: str, platform: str, what: str
) -> None:
    """`pip install --target` of `requirements` for another machine's Python and platform (wheels
    only: nothing is compiled here); `what` names them in the error."""
    arguments = [
        "install",
        "--quiet",
        "--no-compile",
        "--target",
        str(target),
        "--platform",
        platform,
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--only-binary=:all:",
        *requirements,
    ]
    try:
        pip(arguments)
    except (subprocess.CalledProcessError, OSError) as exc:
        raise SettingsError(
            f"could not install {what} for Python {python} ({exc}); check access to PyPI, or build with "
            "--no-deps and install them yourself"
        ) from exc


def build_job_dependencies(out: Path, pip: Pip | None = None, *, python: str = DATAPROC_PYTHON) -> Path:
    """`out/job/deps.zip`: JOB_DEPENDENCIES and theirs, installed for Python `python` (the runtime's,
    DATAPROC_PYTHON, unless another is asked) and the runtime's platform, entries at the archive's root."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        install_wheels(
            pip or _pip,
            site,
            job_dependency_pins(),
            python=python,
            platform=DATAPROC_PLATFORM,
            what="the job's dependencies",
        )
        if not any(path.is_file() for path in site.rglob("*")):
            raise SettingsError(f"pip installed nothing into {site}; the job's dependencies are missing")
        return _zip_folder(site, out / "job" / JOB_DEPS_ARCHIVE)


# -- AWS ------------------------------------------------------------------------------------------


def build_lambda(out: Path, functions_dir: Path = FUNCTIONS_DIR, pip: Pip | None = _pip) -> tuple[Path, Path]:
    """`out/lambda/` (aws_lambda.py, requirements-aws.txt, the turnstile modules aws_lambda.py
    reaches and, unless `pip` is None, those requirements installed for the Lambda runtime) and
    `out/lambda.zip`. Lambda installs nothing itself: the package carries its dependencies, so the
    runtime's own (older) boto3 is never used."""
    folder = _fresh_dir(out / "lambda")
    _fill_source(folder, functions_dir, LAMBDA_FILES, "aws_lambda.py")
    if pip is not None:
        requirements = ["-r", str(functions_dir / "requirements-aws.txt")]
        install_wheels(
            pip,
            folder,
            requirements,
            python=LAMBDA_PYTHON,
            platform=LAMBDA_PLATFORM,
            what="the Lambda's dependencies",
        )
    return folder, _zip_folder(folder, out / "lambda.zip")


def build_aws(out: Path = DEFAULT_BUILD, *, with_deps: bool = True, pip: Pip = _pip) -> BuiltAws:
    """The Lambda package and the EMR job's files, under `out/aws/`."""
    lambda_dir, lambda_zip = build_lambda(out / "aws", pip=pip if with_deps else None)
    job_main, job_package = build_job(out / "aws", AWS_JOB_MAIN, DRIVER_MAIN)
    return BuiltAws(lambda_dir, lambda_zip, job_main, job_package, job_main.with_name("driver.py"))


def build(
    out: Path = DEFAULT_BUILD,
    *,
    scala: str = DEFAULT_SCALA,
    with_jars: bool = True,
    with_deps: bool = True,
    python: str = DATAPROC_PYTHON,
) -> Built:
    """Everything the Terraform configuration reads from `out`; `scala` and `python` are the
    runtime's (the defaults: Dataproc's), for the jars and the job's dependencies."""
    function_dir, function_zip = build_function(out)
    job_main, job_package = build_job(out, JOB_MAIN, DRIVER_MAIN)
    jars = build_jars(out, scala) if with_jars else ()
    deps = build_job_dependencies(out, python=python) if with_deps else None
    return Built(
        function_dir, function_zip, job_main, job_package, jars, deps, job_main.with_name("driver.py")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m turnstile.deploy.packaging",
        description="Build the functions' source and the job's files a deployment uploads.",
    )
    parser.add_argument("build_dir", nargs="?", type=Path, default=DEFAULT_BUILD)
    parser.add_argument(
        "--cloud", choices=("gcp", "aws"), default="gcp", help="gcp: for terraform/; aws: docs/DEPLOY-AWS.md"
    )
    parser.add_argument(
        "--scala", choices=SCALA_VERSIONS, default=DEFAULT_SCALA, help="Scala of the Dataproc runtime"
    )
    parser.add_argument(
        "--python-version",
        type=_python_version,
        default=DATAPROC_PYTHON,
        help=f"Python the job's dependencies are installed for (default {DATAPROC_PYTHON}, the "
        "Dataproc runtime's; this machine's for the Dataproc emulator, docs/DEVELOPING.md)",
    )
    parser.add_argument("--no-jars", action="store_true", help="skip the Iceberg jars (no Java needed)")
    parser.add_argument(
        "--no-deps",
        action="store_true",
        help="skip job/deps.zip, or the Lambda's dependencies (no PyPI needed)",
    )
    args = parser.parse_args(argv)
    try:
        paths = _built_paths(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def _python_version(text: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python version such as 3.11 or 3.12")
    return text


def _built_paths(args: argparse.Namespace) -> list[Path]:
    if args.cloud == "aws":
        aws = build_aws(args.build_dir, with_deps=not args.no_deps)
        return [aws.lambda_zip, aws.job_main, aws.job_driver, aws.job_package]
    built = build(
        args.build_dir,
        scala=args.scala,
        with_jars=not args.no_jars,
        with_deps=not args.no_deps,
        python=args.python_version,
    )
    deps = [built.job_dependencies] if built.job_dependencies is not None else []
    driver = [built.job_driver] if built.job_driver is not None else []
    return [built.function_zip, built.job_main, *driver, built.job_package, *built.jars, *deps]


if __name__ == "__main__":
    sys.exit(main())
