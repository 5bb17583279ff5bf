"""The job side's imports point inward: what a module loads, checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_after_import(module: str) -> set[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def under(modules: set[str], *packages: str) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)}


@pytest.mark.parametrize("module", ["turnstile.state.execution", "turnstile.state.records"])
def test_the_job_contract_knows_no_protocol_runner_or_spark(module: str) -> None:
    loaded = loaded_after_import(module)
    assert under(loaded, "turnstile.protocol", "turnstile.jobs", "turnstile.spark", "pyspark") == set()


def test_the_local_worker_finds_the_job_file_without_importing_spark() -> None:
    assert (
        under(loaded_after_import("turnstile.jobs.local_worker"), "pyspark", "turnstile.spark.main") == set()
    )


@pytest.mark.parametrize(
    "module", ["turnstile.jobs.dataproc", "turnstile.jobs.local", "turnstile.jobs.catalog"]
)
def test_runners_know_no_protocol_and_no_local_stack(module: str) -> None:
    assert under(loaded_after_import(module), "turnstile.protocol", "turnstile.local") == set()


def test_the_sql_builders_need_no_spark() -> None:
    assert under(loaded_after_import("turnstile.spark.sql"), "pyspark", "py4j") == set()
