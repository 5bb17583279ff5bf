"""Shared fixtures: the fake-gcs-server emulator, a moto server for AWS, and an `ObjectStore` per
implementation."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.cloud import storage

from turnstile.jobs.local_spark import check_java, ensure_jars, spark_conf
from turnstile.local import emulator as emu
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore
from turnstile.store.s3 import S3Store
from turnstile.store.s3 import make_client as make_s3_client
from turnstile.store.split import SplitStore
from turnstile_dev.dataproc_emulator import TURNSTILE_ARGS, DataprocEmulator, Runtime

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


AWS_REGION = "eu-west-1"
# Dummy credentials: moto accepts any, and no test may reach a real AWS account.
AWS_TEST_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": AWS_REGION,
    "AWS_DEFAULT_REGION": AWS_REGION,
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
}


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """A real moto server (S3, EMR Serverless) on a free loopback port; its URL.

    The dummy credentials stay in the environment for the whole session, so every client and every
    child process (a local Spark job) signs its requests without an AWS account.

    moto checks a conditional write (`If-Match`, `If-None-Match`) and then writes, with no lock
    between, and its server runs each request on a thread: two writes conditioned on the same ETag
    can both land, which S3 never allows. Its object writes are therefore taken one at a time, so
    the tests test turnstile's compare-and-swap, not moto's race."""
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    port = emu.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    unlocked, one_at_a_time = S3Response._key_response, threading.Lock()

    def atomic(self: S3Response, request: Any, full_url: str) -> Any:
        if request.method in ("GET", "HEAD"):
            return unlocked(self, request, full_url)
        with one_at_a_time:
            return unlocked(self, request, full_url)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(S3Response, "_key_response", atomic)
        server.start()
        for key, value in AWS_TEST_ENVIRONMENT.items():
            patch.setenv(key, value)
        yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws_env(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The moto server, with AWS_ENDPOINT_URL set for code that builds its own clients."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    return moto_server


def create_s3_bucket(moto_server: str, *, versioned: bool = True) -> str:
    """A fresh, empty bucket in the moto server; versioned, as docs/DEPLOY-AWS.md asks of the
    bucket upstream writes to, unless `versioned=False`."""
    name = f"test-bucket-s3-{next(_buckets)}"
    client = make_s3_client(AWS_REGION, moto_server)
    client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": AWS_REGION})
    if versioned:
        client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


@pytest.fixture
def s3_bucket(moto_server: str) -> str:
    """A fresh, empty, versioned bucket in the moto server for each test."""
    return create_s3_bucket(moto_server)


@pytest.fixture
def s3_store(moto_server: str, s3_bucket: str) -> S3Store:
    return S3Store(make_s3_client(AWS_REGION, moto_server), s3_bucket)


@pytest.fixture(params=["memory", "gcs", "s3", "split"])
def store(request: pytest.FixtureRequest) -> ObjectStore:
    """The same contract, run over every `ObjectStore` implementation (`split`: data and state
    buckets, STATE_BUCKET)."""
    if request.param == "memory":
        return MemoryStore("memory-bucket")
    if request.param == "split":  # one generation counter: two buckets never issue the same one
        generations = itertools.count(1_700_000_000_000_001)
        return SplitStore(
            MemoryStore("data-bucket", generations=generations),
            MemoryStore("state-bucket", generations=generations),
        )
    return request.getfixturevalue(f"{request.param}_store")  # type: ignore[no-any-return]


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


@pytest.fixture(scope="session")
def dataproc_emulator(
    gcs_emulator: emu.Emulator, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DataprocEmulator]:
    """The Dataproc emulator (turnstile_dev.dataproc_emulator): batches read `gs://` from
    fake-gcs-server and run turnstile's job with its local seam (`--stage-to`)."""
    runtime = Runtime(
        root=tmp_path_factory.mktemp("dataproc"),
        storage=lambda: make_client("local", gcs_emulator.url),
        environment={"STORAGE_EMULATOR_HOST": gcs_emulator.url, "GOOGLE_CLOUD_PROJECT": "local"},
        extra_args=TURNSTILE_ARGS,
        cancel_grace=5.0,
    )
    with DataprocEmulator(runtime) as server:
        yield server
