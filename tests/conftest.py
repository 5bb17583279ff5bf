"""Shared fixtures: the fake-gcs-server emulator and an `ObjectStore` per implementation."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import storage

from turnstile.jobs.local_spark import check_java, ensure_jars, spark_conf
from turnstile.local import emulator as emu
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore

_buckets = itertools.count()


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[emu.Emulator]:
    server = emu.start(tmp_path_factory.mktemp("fake-gcs"))
    yield server
    server.stop()


@pytest.fixture
def emulator_env(gcs_emulator: emu.Emulator, monkeypatch: pytest.MonkeyPatch) -> emu.Emulator:
    """The emulator, with STORAGE_EMULATOR_HOST set for code that builds its own client."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    return gcs_emulator


@pytest.fixture
def gcs_client(gcs_emulator: emu.Emulator) -> storage.Client:
    return make_client("local", gcs_emulator.url)


@pytest.fixture
def bucket_name(gcs_emulator: emu.Emulator) -> str:
    """A fresh, empty bucket in the emulator for each test."""
    name = f"test-bucket-{next(_buckets)}"
    gcs_emulator.create_bucket(name)
    return name


@pytest.fixture
def gcs_store(gcs_emulator: emu.Emulator, gcs_client: storage.Client, bucket_name: str) -> GcsStore:
    """As the product builds it for an emulator (`wiring.object_store`): its DELETE preconditions
    enforced under the machine-wide write lock (`turnstile.store.emulated`)."""
    return GcsStore(gcs_client, bucket_name, emulator_writes=WriteLock.for_emulator(gcs_emulator.url))


@pytest.fixture(params=["memory", "gcs"])
def store(request: pytest.FixtureRequest) -> ObjectStore:
    """The same contract, run over every `ObjectStore` implementation."""
    if request.param == "memory":
        return MemoryStore("memory-bucket")
    return request.getfixturevalue("gcs_store")  # type: ignore[no-any-return]


@pytest.fixture
def tmp_home(tmp_path: Path) -> Path:
    return tmp_path


# One local Spark session with Iceberg for every Spark and end-to-end test: starting the JVM is the slow part.


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
