"""One local Spark session with Iceberg for all Spark tests: starting the JVM is the slow part."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnstile.local.jars import check_java, ensure_jars, spark_conf


@pytest.fixture(scope="session")
def iceberg_jars(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The jars built from scratch into a fresh folder, as on a new checkout."""
    check_java()
    return ensure_jars(tmp_path_factory.mktemp("jars"))


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="session")
def spark(iceberg_jars: list[Path], warehouse: Path) -> Iterator[object]:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("turnstile-tests")
    for key, value in spark_conf(iceberg_jars, warehouse).items():
        builder = builder.config(key, value)
    started = time.perf_counter()
    session = builder.getOrCreate()
    print(f"\nspark session started in {time.perf_counter() - started:.1f}s")
    yield session
    session.stop()
