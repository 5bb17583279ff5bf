"""A batch whose read fails because the machine failed (the driver's JVM gone, a connection
refused, the Spark context stopped, storage not answering) is not the batch's failure: the job ends
without recording one, which the protocol retries as a transient failure. Bad data still fails
the batch."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError, Py4JNetworkError

from tests.spark.jobkit import Kit, csv
from turnstile.core.errors import StoreUnavailable
from turnstile.spark import messages, reading
from turnstile.spark.staging import Located
from turnstile.state.records import BatchOutcome
from turnstile.store.memory import MemoryStore
from turnstile.store.port import StoredObject

pytestmark = pytest.mark.spark


def _nothing_recorded(kit: Kit, batch: Any, job_id: str = "job-1") -> None:
    assert kit.store.read(batch.result) is None  # no FAILED record: nothing blames the batch
    assert kit.store.read(f"{kit.prefix}/_turnstile/jobs/{job_id}.done") is None


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Unreachable:
    """Staging that hands Spark the batch at a storage address nothing answers on."""

    def locate(self, uris: Sequence[str], sizes: Sequence[int] | None = None) -> Located:
        return Located([f"hdfs://127.0.0.1:{_closed_port()}/part-0.csv"], 0)


def test_a_read_whose_storage_refuses_the_connection_is_not_the_batchs_failure(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, format="csv", schema="id INT, v STRING")
    kit.staging = _Unreachable()  # type: ignore[assignment]
    batch = kit.batch("h01", csv("id,v", "1,a"))
    with pytest.raises(Exception) as raised:
        kit.run(batch)
    assert messages.machine_failure(raised.value), raised.value
    _nothing_recorded(kit, batch)


@pytest.mark.parametrize(
    "failure",
    [
        Py4JNetworkError("Answer from Java side is empty"),
        ConnectionRefusedError(111, "Connection refused"),
    ],
    ids=["py4j", "connection"],
)
def test_a_driver_that_dies_during_the_read_leaves_the_batch_unrecorded(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    kit = Kit(spark, tmp_path, format="csv")
    batch = kit.batch("h01", csv("id,v", "1,a"))

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise failure

    monkeypatch.setattr(reading, "read", dies)
    with pytest.raises(type(failure)):
        kit.run(batch)
    _nothing_recorded(kit, batch)


def test_a_stopped_spark_context_is_the_machines_failure(spark: Any) -> None:
    """As the JVM reports it: an IllegalStateException, under a Spark error or on its own."""
    jvm = spark.sparkContext._jvm
    stopped = jvm.java.lang.IllegalStateException("Cannot call methods on a stopped SparkContext.")
    wrapped = jvm.org.apache.spark.SparkException("Job aborted", stopped)
    assert messages.machine_failure(Py4JJavaError("o42.load", stopped))
    assert messages.machine_failure(Py4JJavaError("o42.load", wrapped))
    refused = jvm.java.net.ConnectException("Connection refused")
    assert messages.machine_failure(Py4JJavaError("o42.load", jvm.java.io.IOException("read", refused)))
    corrupt = jvm.java.io.IOException("file:/x/part-0.parquet is not a Parquet file")
    assert not messages.machine_failure(Py4JJavaError("o42.load", corrupt))


def test_a_corrupt_file_still_fails_the_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="parquet")
    batch = kit.batch("h01", ("part-0.parquet", b"not parquet at all"))
    done = kit.run(batch)
    assert done.outcomes == {"h01": BatchOutcome.FAILED}
    assert "h01" in (done.error or "")


class _Unavailable(MemoryStore):
    def read(self, name: str) -> StoredObject | None:
        if name.endswith("/h01/part-0.csv"):
            raise StoreUnavailable(f"gs://{self.bucket}/{name}: storage did not answer: 503")
        return super().read(name)


def test_a_data_file_storage_does_not_serve_is_not_the_batchs_failure(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="csv")
    kit.store = _Unavailable(kit.store.bucket)
    batch = kit.batch("h01", csv("id,v", "1,a"))
    with pytest.raises(StoreUnavailable):
        kit.run(batch)
    _nothing_recorded(kit, batch)
