"""The deployable artefacts: the function source folder and archive, the job's main file and package
zip, the Iceberg jars for Dataproc; that each holds only what runs there; and that the functions'
requirements cover what their code imports."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.dependencies import canonical, requirement_names, unprovided, with_dependencies
from turnstile.core.errors import SettingsError
from turnstile.deploy import importgraph, jars, packaging
from turnstile.store import s3

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT / "shared"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> packaging.Built:
    return packaging.build(tmp_path_factory.mktemp("build"), with_jars=False, with_deps=False)


def _python(code: str, cwd: Path, *path: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter that sees turnstile only in `path`: no shared/ (the editable
    install) nor any other folder holding a turnstile package, since the namespace package would
    merge them and hide a module missing from an artefact."""
    prelude = (
        "import sys, os\n"
        "sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or '.', 'turnstile'))]\n"
        f"sys.path[:0] = {[str(p) for p in path]!r}\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_function_folder_holds_the_entrypoints_and_the_package(built: packaging.Built) -> None:
    folder = built.function_dir
    assert (folder / "main.py").read_text() == (ROOT / "functions" / "main.py").read_text()
    assert (folder / "requirements.txt").read_text() == (ROOT / "functions" / "requirements.txt").read_text()
    assert (folder / "turnstile" / "entrypoints" / "entry.py").is_file()
    assert not list(folder.rglob("__pycache__"))


def test_function_archive_is_the_folder(built: packaging.Built) -> None:
    with zipfile.ZipFile(built.function_zip) as archive:
        names = set(archive.namelist())
    on_disk = {
        p.relative_to(built.function_dir).as_posix() for p in built.function_dir.rglob("*") if p.is_file()
    }
    assert names == on_disk
    assert {
        "main.py",
        "requirements.txt",
        "turnstile/entrypoints/entry.py",
        "turnstile/config/settings.py",
    } <= names


def test_function_imports_turnstile_from_its_own_folder(built: packaging.Built) -> None:
    done = _python(
        "import main, turnstile.entrypoints.entry\n"
        "print(turnstile.entrypoints.entry.__file__)\n"
        "print(callable(main.on_object_finalized), callable(main.sweep))\n",
        built.function_dir,
        built.function_dir,
    )
    assert done.returncode == 0, done.stderr
    where, callables = done.stdout.splitlines()
    assert Path(where).is_relative_to(built.function_dir)
    assert callables == "True True"


def test_job_package_imports_from_the_zip(built: packaging.Built, tmp_path: Path) -> None:
    done = _python(
        "import importlib.util, turnstile.config.settings, turnstile.state.execution\n"
        "print(turnstile.config.settings.__file__)\n"
        "print(importlib.util.find_spec('turnstile.spark.applier').origin)\n",
        tmp_path,
        built.job_package,
    )
    assert done.returncode == 0, done.stderr
    settings, applier = done.stdout.splitlines()
    assert settings.startswith(str(built.job_package))
    assert applier.startswith(str(built.job_package))
    assert built.job_main.read_text() == packaging.JOB_MAIN.read_text()
    assert "def main(" in built.job_main.read_text()


def test_archives_are_reproducible(built: packaging.Built, tmp_path: Path) -> None:
    again = packaging.build(tmp_path, with_jars=False, with_deps=False)
    assert again.function_zip.read_bytes() == built.function_zip.read_bytes()
    assert again.job_package.read_bytes() == built.job_package.read_bytes()


def test_deterministic_zip_sorts_and_fixes_times(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("b")
    target = packaging.deterministic_zip(
        [("z/b.txt", tmp_path / "b.txt"), ("a.txt", b"a")], tmp_path / "x.zip"
    )
    with zipfile.ZipFile(target) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == ["a.txt", "z/b.txt"]
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert archive.read("a.txt") == b"a"


# -- what the artefacts leave out ---------------------------------------------------------------------

TOOLING = ("turnstile_dev/", "turnstile/bench/", "turnstile/simulation/", "turnstile/demo.py")
"""The development tooling: in no artefact."""

OPERATOR = (
    "turnstile/cli",  # the CLI, a module or a package
    "turnstile/ops/",
    "turnstile/deploy/packaging.py",
    "turnstile/deploy/importgraph.py",
    "turnstile/local/stack.py",  # the local stack: emulator, event bridge, function host
    "turnstile/local/emulator.py",
    "turnstile/local/bridge.py",
    "turnstile/local/commands.py",
    "turnstile/py.typed",
)
"""What runs on an operator's or developer's machine only."""

NOT_IN_FUNCTION = (*TOOLING, *OPERATOR, "turnstile/spark/")  # the function submits the job, never runs it
NOT_IN_JOB = (
    *TOOLING,
    *OPERATOR,
    "turnstile/local/",
    "turnstile/protocol/",
    "turnstile/entrypoints/entry.py",
    "turnstile/entrypoints/wiring.py",
    "turnstile/jobs/dataproc.py",
    "turnstile/jobs/local.py",
    "turnstile/store/memory.py",
)


def _names(archive_path: Path) -> list[str]:
    with zipfile.ZipFile(archive_path) as archive:
        return archive.namelist()


def _unwanted(names: list[str], excluded: tuple[str, ...]) -> list[str]:
    return sorted(name for name in names if name.startswith(excluded))


def test_function_archive_holds_only_what_the_function_runs(built: packaging.Built) -> None:
    names = _names(built.function_zip)
    assert not _unwanted(names, NOT_IN_FUNCTION)
    expected = {rel.as_posix() for rel in packaging.reached_files(ROOT / "functions" / "main.py")}
    assert set(names) == expected | set(packaging.FUNCTION_FILES)


def test_job_package_holds_only_what_the_job_runs(built: packaging.Built) -> None:
    names = _names(built.job_package)
    assert not _unwanted(names, NOT_IN_JOB)
    expected = {rel.as_posix() for rel in packaging.reached_files(packaging.JOB_MAIN, packaging.DRIVER_MAIN)}
    assert set(names) == expected | {"turnstile/__init__.py"}
    assert "turnstile/spark/applier.py" in names


def test_the_warm_driver_main_file_is_built_beside_the_jobs_and_its_modules_are_zipped(
    built: packaging.Built,
) -> None:
    assert built.job_driver == built.job_main.with_name("driver.py")
    assert built.job_driver.read_bytes() == packaging.DRIVER_MAIN.read_bytes()
    names = set(_names(built.job_package))
    for module in (
        "entrypoints/driver_serve.py",
        "state/spoolserve.py",
        "jobs/driver_policy.py",
        "spark/warm.py",
    ):
        assert f"turnstile/{module}" in names


def test_the_tooling_is_outside_the_package() -> None:
    assert (SHARED / "turnstile_dev" / "bench" / "__main__.py").is_file()
    assert (SHARED / "turnstile_dev" / "simulation" / "__main__.py").is_file()
    assert (SHARED / "turnstile_dev" / "demo.py").is_file()
    assert not [p for p in ("bench", "simulation", "demo.py") if (SHARED / "turnstile" / p).exists()]


def test_the_library_never_imports_the_tooling() -> None:
    offenders = {
        path.relative_to(SHARED).as_posix(): name
        for path in (SHARED / "turnstile").rglob("*.py")
        for name in importgraph.imported_names(path, SHARED)
        if name.split(".")[0] == "turnstile_dev"
    }
    assert not offenders, f"the library imports the development tooling: {offenders}"


# -- the functions' dependencies ----------------------------------------------------------------------


def _third_party_imports(start: Path) -> set[str]:
    """Top-level third-party modules imported by `start` and every turnstile module it reaches."""
    return importgraph.third_party(
        {start} | importgraph.reached([start], SHARED, "turnstile"), SHARED, ["turnstile"]
    )


def test_function_requirements_cover_what_the_function_imports() -> None:
    deployed = requirement_names(ROOT / "functions" / "requirements.txt")
    missing = unprovided(_third_party_imports(ROOT / "functions" / "main.py"), deployed)
    assert not missing, f"imported by the function but not in functions/requirements.txt: {missing}"


def test_function_requirements_leave_out_spark() -> None:
    deployed = with_dependencies(requirement_names(ROOT / "functions" / "requirements.txt"))
    assert not {"pyspark", "snowpark-connect-deps-iceberg", "py4j"} & deployed


# -- jars ---------------------------------------------------------------------------------------------


def test_runtime_jar_matches_the_scala_version() -> None:
    assert jars.iceberg_runtime_jar("2.13").name.startswith("iceberg-spark-runtime-3.5_2.13-")
    assert jars.iceberg_runtime_jar("2.12").name.startswith("iceberg-spark-runtime-3.5_2.12-")
    with pytest.raises(SettingsError, match="Scala"):
        jars.iceberg_runtime_jar("3")


@pytest.mark.skipif(
    not Path("/usr/share/java/jarjar.jar").is_file(), reason="jarjar (libjarjar-java) missing"
)
def test_jars_for_dataproc(tmp_path: Path) -> None:
    built = jars.build_jars(tmp_path)
    names = sorted(j.name for j in built)
    assert len(names) == 2
    assert any(re.fullmatch(r"iceberg-spark-runtime-3\.5_2\.13-[\d.]+\.jar", n) for n in names)
    assert any("shaded-jackson" in n for n in names)
    with zipfile.ZipFile(next(j for j in built if "shaded-jackson" in j.name)) as jar:
        assert any(n.startswith("org/apache/iceberg/shaded/com/fasterxml/jackson/") for n in jar.namelist())


# -- AWS -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_aws(tmp_path_factory: pytest.TempPathFactory) -> packaging.BuiltAws:
    return packaging.build_aws(tmp_path_factory.mktemp("build"), with_deps=False)


def test_the_aws_job_runs_the_s3_main_file_and_the_driver_with_the_s3_store_in_its_zip(
    built_aws: packaging.BuiltAws, tmp_path: Path
) -> None:
    assert built_aws.job_main.read_text() == packaging.AWS_JOB_MAIN.read_text()
    assert built_aws.job_driver.read_text() == packaging.DRIVER_MAIN.read_text()
    names = _names(built_aws.job_package)
    assert not _unwanted(names, NOT_IN_JOB)
    starts = (packaging.AWS_JOB_MAIN, packaging.DRIVER_MAIN)
    expected = {rel.as_posix() for rel in packaging.reached_files(*starts)}
    assert set(names) == expected | {"turnstile/__init__.py"}
    wanted = {"turnstile/store/s3.py", "turnstile/spark/main_aws.py", "turnstile/entrypoints/driver_serve.py"}
    assert wanted <= set(names)
    done = _python(
        "import turnstile.store.s3, turnstile.spark.main_aws, turnstile.entrypoints.driver_serve\n"
        "print(turnstile.store.s3.__file__)\n",
        tmp_path,
        built_aws.job_package,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(built_aws.job_package))


def test_the_lambda_package_holds_the_handlers_and_what_they_reach(built_aws: packaging.BuiltAws) -> None:
    folder = built_aws.lambda_dir
    assert (folder / "aws_lambda.py").read_text() == (ROOT / "functions" / "aws_lambda.py").read_text()
    names = _names(built_aws.lambda_zip)
    assert not _unwanted(names, NOT_IN_FUNCTION)
    expected = {rel.as_posix() for rel in packaging.reached_files(ROOT / "functions" / "aws_lambda.py")}
    assert set(names) == expected | set(packaging.LAMBDA_FILES)
    assert {"turnstile/entrypoints/lambda_entry.py", "turnstile/store/s3.py", "turnstile/jobs/emr.py"} <= set(
        names
    )
    done = _python(
        "import aws_lambda, turnstile.entrypoints.lambda_entry\n"
        "print(turnstile.entrypoints.lambda_entry.__file__)\n"
        "print(callable(aws_lambda.on_s3_event), callable(aws_lambda.sweep))\n",
        folder,
        folder,
    )
    assert done.returncode == 0, done.stderr
    where, callables = done.stdout.splitlines()
    assert Path(where).is_relative_to(folder)
    assert callables == "True True"


def test_the_lambda_package_carries_its_dependencies_for_the_lambda_runtime(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    folder, archive = packaging.build_lambda(tmp_path, pip=_fake_pip(calls))
    [arguments] = calls
    assert arguments[arguments.index("--target") + 1] == str(folder)
    assert arguments[arguments.index("-r") + 1] == str(ROOT / "functions" / "requirements-aws.txt")
    assert arguments[arguments.index("--python-version") + 1] == packaging.LAMBDA_PYTHON
    assert arguments[arguments.index("--platform") + 1] == packaging.LAMBDA_PLATFORM
    assert "--only-binary=:all:" in arguments
    names = _names(archive)
    assert "pydantic/__init__.py" in names and "aws_lambda.py" in names
    assert not [n for n in names if "__pycache__" in n]


def _imported_names(files: set[Path]) -> set[str]:
    """Every dotted name `files` import (`from x import y` gives x and x.y)."""
    imported: set[str] = set()
    for source in files:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    return imported


def test_lambda_requirements_cover_every_module_the_lambda_imports() -> None:
    """Dotted names, not top-level ones: `google` alone would pass with google-cloud-storage while
    `google.cloud.dataproc_v1` needs google-cloud-dataproc."""
    start = ROOT / "functions" / "aws_lambda.py"
    files = {start} | importgraph.reached([start], SHARED, "turnstile")
    deployed = with_dependencies(requirement_names(ROOT / "functions" / "requirements-aws.txt"))
    missing = {}
    for module in sorted(_imported_names(files)):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "turnstile":
            continue
        dist = _distribution_of(module)
        if dist is not None and canonical(dist) not in deployed:
            missing[module] = dist
    assert not missing, f"imported by the Lambda but not in functions/requirements-aws.txt: {missing}"
    assert not {"pyspark", "py4j", "functions-framework"} & deployed


def _pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirements file: version by canonical name."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {canonical(name): version for name, _, version in (line.partition("==") for line in lines if line)}


def test_lambda_requirements_pin_the_tested_boto3_and_the_locked_rest() -> None:
    pins = _pins(ROOT / "functions" / "requirements-aws.txt")
    assert (pins.pop("boto3"), pins.pop("botocore")) == (s3.TESTED_BOTO3, s3.TESTED_BOTOCORE)
    assert (md.version("boto3"), md.version("botocore")) == (s3.TESTED_BOTO3, s3.TESTED_BOTOCORE)
    locked = _pins(ROOT / "requirements.txt")
    assert pins == {name: locked[name] for name in pins}


def test_main_prints_what_it_built_for_aws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert packaging.main([str(tmp_path), "--cloud", "aws", "--no-deps"]) == 0
    assert capsys.readouterr().out.split() == [
        str(tmp_path / "aws" / "lambda.zip"),
        str(tmp_path / "aws" / "job" / "main.py"),
        str(tmp_path / "aws" / "job" / "driver.py"),
        str(tmp_path / "aws" / "job" / "turnstile.zip"),
    ]


def test_main_prints_what_it_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert packaging.main([str(tmp_path), "--no-jars", "--no-deps"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [
        str(tmp_path / "function.zip"),
        str(tmp_path / "job" / "main.py"),
        str(tmp_path / "job" / "driver.py"),
        str(tmp_path / "job" / "turnstile.zip"),
    ]


# -- the job's dependencies ---------------------------------------------------------------------------


def _fake_pip(calls: list[list[str]]) -> packaging.Pip:
    """Stands in for `pip install --target`: records the arguments, writes what pip would."""

    def pip(arguments: list[str]) -> None:
        calls.append(arguments)
        site = Path(arguments[arguments.index("--target") + 1])
        for name, text in {
            "pydantic/__init__.py": "VERSION = '2.14.3'\n",
            "pydantic-2.14.3.dist-info/METADATA": "Name: pydantic\n",
            "pydantic_core/_pydantic_core.cpython-312-x86_64-linux-gnu.so": "\x7fELF",
            "pydantic/__pycache__/__init__.cpython-312.pyc": "cache",
        }.items():
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_text(text)

    return pip


def test_job_dependencies_are_installed_for_the_runtime_and_zipped(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    deps = packaging.build_job_dependencies(tmp_path / "a", _fake_pip(calls))
    [arguments] = calls
    assert arguments[0] == "install"
    assert arguments[arguments.index("--python-version") + 1] == "3.12"
    assert arguments[arguments.index("--platform") + 1] == "manylinux2014_x86_64"
    assert "--only-binary=:all:" in arguments  # wheels for the runtime, nothing built here
    pins = {r.name: str(r.specifier) for r in map(Requirement, packaging.job_dependency_pins())}
    assert set(pins) == set(packaging.JOB_DEPENDENCIES)
    for name, specifier in pins.items():
        assert f"{name}{specifier}" in arguments
        assert specifier == f"=={md.version(name)}"  # what the tests ran with
    with zipfile.ZipFile(deps) as archive:
        names = archive.namelist()
    # At the archive's root: Spark extracts it into the folder its `#turnstile_deps` fragment names.
    assert names == [
        "pydantic-2.14.3.dist-info/METADATA",
        "pydantic/__init__.py",
        "pydantic_core/_pydantic_core.cpython-312-x86_64-linux-gnu.so",
    ]
    again = packaging.build_job_dependencies(tmp_path / "b", _fake_pip([]))
    assert again.read_bytes() == deps.read_bytes()


def test_a_failed_dependency_install_says_what_to_do(tmp_path: Path) -> None:
    def failing(arguments: list[str]) -> None:
        raise subprocess.CalledProcessError(1, ["pip", *arguments])

    with pytest.raises(SettingsError, match=r"Python 3\.12.*--no-deps"):
        packaging.build_job_dependencies(tmp_path, failing)


def test_a_job_dependency_without_a_pin_is_an_error(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("pydantic==2.14.3\n")
    with pytest.raises(SettingsError, match="google-cloud-storage"):
        packaging.job_dependency_pins(requirements)


def _distribution_of(module: str) -> str | None:
    """The installed distribution that provides `module` (namespace packages such as `google`
    are shared by many: the one holding the dotted path)."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        path = "/".join(parts[:depth])
        for dist in md.packages_distributions().get(parts[0], []):
            files = md.files(dist) or []
            if any(str(f).startswith(f"{path}/") or str(f) == f"{path}.py" for f in files):
                return dist
    return None


def _closure(names: tuple[str, ...]) -> set[str]:
    """The distributions and everything they require (no extras), canonical names."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop().lower())
        if name in seen:
            continue
        seen.add(name)
        for spec in md.requires(name) or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_the_job_imports_only_what_it_ships_or_the_runtime_has() -> None:
    """Every third-party import of every turnstile module the job loads comes from JOB_DEPENDENCIES
    (or what they require) or from PySpark: a new import the zip does not ship fails here."""
    done = _python(
        "import sys, turnstile.spark.run, turnstile.spark.main, turnstile.store.gcs\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('turnstile.'))))",
        ROOT,
        SHARED,
    )
    assert done.returncode == 0, done.stderr
    imported: set[str] = set()
    for module in done.stdout.split():
        source = SHARED / (module.replace(".", "/") + ".py")
        if not source.is_file():
            continue  # a package folder without __init__.py
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
    third_party = {
        m
        for m in imported
        if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "turnstile"
    }
    assert "pydantic" in third_party and "google.cloud.storage" in third_party
    shipped = _closure(packaging.JOB_DEPENDENCIES) | _closure(("pyspark",))
    for module in sorted(third_party):
        dist = _distribution_of(module)
        if dist is None:
            continue  # a name imported from a module (from x import y): x is checked itself
        assert re.sub(r"[-_.]+", "-", dist.lower()) in shipped, (
            f"the job imports {module} ({dist}), not shipped"
        )


def test_shipped_dependencies_come_first_on_the_path(tmp_path: Path) -> None:
    shipped = tmp_path / "work" / "turnstile_deps"
    (shipped / "pydantic").mkdir(parents=True)
    (shipped / "pydantic" / "__init__.py").write_text("VERSION = 'shipped'\n")
    done = _python(
        "from pathlib import Path\n"
        "from turnstile.spark.dependencies import use_shipped\n"
        f"found = use_shipped([Path({str(tmp_path / 'absent')!r}), Path({str(shipped)!r})])\n"
        "import pydantic\n"
        "print(found, pydantic.VERSION)\n"
        f"print(use_shipped([Path({str(tmp_path / 'absent')!r})]))\n",
        tmp_path,
        SHARED,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(shipped), "shipped", "None"]


def test_job_dependencies_for_another_python(tmp_path: Path) -> None:
    """`--python-version 3.11`: deps.zip for this machine's interpreter (the Dataproc emulator runs
    the job on it), not for the runtime's 3.12."""
    calls: list[list[str]] = []
    packaging.build_job_dependencies(tmp_path, _fake_pip(calls), python="3.11")
    assert calls[0][calls[0].index("--python-version") + 1] == "3.11"


def test_main_builds_the_job_dependencies_for_the_python_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(packaging, "_pip", _fake_pip(calls))
    assert packaging.main([str(tmp_path), "--no-jars", "--python-version", "3.11"]) == 0
    assert calls[0][calls[0].index("--python-version") + 1] == "3.11"
    assert (tmp_path / "job" / "deps.zip").is_file()


def test_a_python_version_that_is_not_one_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        packaging.main(["--python-version", "python3"])
    error = capsys.readouterr().err
    assert "--python-version" in error and "'python3'" in error and "3.11" in error
