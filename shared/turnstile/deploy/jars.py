"""The jars a Dataproc batch needs beside its runtime's own: the Iceberg Spark runtime for the
runtime's Scala version and the relocated Jackson classes it lacks (see turnstile.jobs.local_spark)."""

from __future__ import annotations

import re
import shutil
from importlib.util import find_spec
from pathlib import Path

from turnstile.core.errors import SettingsError
from turnstile.jobs import local_spark

SCALA_VERSIONS = ("2.12", "2.13")
DEFAULT_SCALA = "2.13"
"""Dataproc Serverless runtime 2.x (Spark 3.5, Scala 2.13); runtime 1.2 would need 2.12, and so does
the local pyspark (the Dataproc emulator, turnstile_dev.dataproc_emulator)."""


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
