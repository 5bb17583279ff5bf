"""Nested batch folders through the functions on fake-gcs-server: a batch laid out as Spark writes
it partitioned (`dt=…/part-….parquet`, `.crc` files, one `_SUCCESS`) is one batch holding every
data file below its folder, on the unordered path (the manifest builder lists the folder) and the
ordered one (the subscriber reuses its backlog listing)."""

from __future__ import annotations

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import invocation
from turnstile.names.paths import Table
from turnstile.ops.retry import failures
from turnstile.protocol import operator
from turnstile.state.records import Manifest
from turnstile.store.gcs import GcsStore

DATA = ["dt=2024-05-01/part-0.parquet", "dt=2024-05-02/hour=13/part-1.parquet"]
SIDE = ["dt=2024-05-01/.part-0.parquet.crc", "._SUCCESS.crc", "_temporary/0/part-9.parquet"]


def put_spark_output(host: Host, folder: str) -> int:
    for rel in DATA + SIDE:
        host.upload(f"{folder}/{rel}", b"x")
    return host.upload(f"{folder}/_SUCCESS")


def manifests(host: Host, table: str) -> list[Manifest]:
    names = [o.name for o in host.store.inner.list_objects(f"{table}/_turnstile/jobs/")]
    found = [host.store.inner.read(n) for n in names if n.endswith(".manifest.json")]
    return [Manifest.decode(f.data, "manifest") for f in found if f is not None]


def data_uris(host: Host, table: str) -> list[list[str]]:
    """Per batch of every job, its data URIs."""
    return [list(batch.data_uris) for m in manifests(host, table) for batch in m.batches]


def expected(host: Host, folder: str) -> list[str]:
    return [f"gs://{host.bucket}/{folder}/{rel}" for rel in DATA]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_a_parquet_batch_is_every_data_file_below_its_folder(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, ordered: bool
) -> None:
    host = start_host(monkeypatch, gcs_store)
    host.upload("sales/orders/_config/load.json", b'{"format": "parquet"}')
    if ordered:
        host.upload("sales/orders/_config/ORDERME")
    folder = "sales/orders/2024/05/01/13"
    generation = put_spark_output(host, folder)
    host.drain()
    assert host.tables.commits["sales/orders"] == [("2024/05/01/13", generation)]
    assert data_uris(host, "sales/orders") == [expected(host, folder)]


def test_with_nested_off_a_batch_is_only_the_files_directly_in_its_folder(host: Host) -> None:
    host.upload("sales/orders/_config/load.json", b'{"format": "parquet", "nested": false}')
    folder = "sales/orders/2024/05/01/13"
    host.upload(f"{folder}/part-own.parquet", b"x")
    put_spark_output(host, folder)
    host.drain()
    assert data_uris(host, "sales/orders") == [[f"gs://{host.bucket}/{folder}/part-own.parquet"]]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_a_batch_folder_inside_a_nested_batch_stays_its_own_batch(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, ordered: bool
) -> None:
    # The default layout lets a day's batch folder hold its hours' batch folders.
    host = start_host(monkeypatch, gcs_store)
    host.upload("sales/orders/_config/load.json", b'{"format": "parquet"}')
    if ordered:
        host.upload("sales/orders/_config/ORDERME")
    day, hour = "sales/orders/2024/05/01", "sales/orders/2024/05/01/13"
    host.upload(f"{hour}/part-hour.parquet", b"x")
    host.upload(f"{hour}/_SUCCESS")
    host.upload(f"{day}/dt=x/part-day.parquet", b"x")
    host.upload(f"{day}/_SUCCESS")
    host.drain()
    assert sorted(host.tables.applied_rels("sales/orders")) == ["2024/05/01", "2024/05/01/13"]
    assert sorted(data_uris(host, "sales/orders")) == sorted(
        [
            [f"gs://{host.bucket}/{day}/dt=x/part-day.parquet"],
            [f"gs://{host.bucket}/{hour}/part-hour.parquet"],
        ]
    )


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_csv_files_in_sub_folders_stop_the_batch_until_nested_says_whether_to_load_them(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, ordered: bool
) -> None:
    """gcs_ocn_bq_ingest read every file below a batch folder; turnstile reads a CSV batch's own
    files unless `nested` says otherwise, so the files in `sub/` are never dropped without a word."""

    host = start_host(monkeypatch, gcs_store, {"ORDER_PER_TABLE": "true"} if ordered else {})
    host.upload("ds/csv/01/top.csv", b"id\n1\n")
    host.upload("ds/csv/01/sub/a.csv", b"id\n2\n")
    host.upload("ds/csv/01/_SUCCESS")
    host.drain()
    assert data_uris(host, "ds/csv") == []  # no job
    expected_error = "also has data files in the sub-folders sub/, which a batch of this format reads only"
    if ordered:
        lock = host.lock("ds/csv")
        assert lock.failed_rel == "01" and expected_error in (lock.error or "")
    else:
        [failure] = failures(invocation(host), Table(host.bucket, "ds/csv", "ds", "csv"))
        assert failure.rel == "01" and expected_error in failure.error
    host.upload("ds/csv/_config/load.json", b'{"nested": true}')  # load them, as the original did
    if ordered:
        operator.unlock(invocation(host), Table(host.bucket, "ds/csv", "ds", "csv"), skip_head=False)
    host.upload("ds/csv/02/top.csv", b"id\n3\n")
    host.upload("ds/csv/02/sub/b.csv", b"id\n4\n")
    host.upload("ds/csv/02/_SUCCESS")
    host.drain()
    applied = data_uris(host, "ds/csv")
    assert [f"gs://{host.bucket}/ds/csv/02/{n}" for n in ("sub/b.csv", "top.csv")] in applied
    if ordered:  # the blocked batch, after the fix and the unlock
        assert [f"gs://{host.bucket}/ds/csv/01/{n}" for n in ("sub/a.csv", "top.csv")] in applied


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.parametrize("nested", ["false", "true"])
def test_a_success_marker_not_starting_with_an_underscore_is_never_data(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, ordered: bool, nested: str
) -> None:
    """SUCCESS_FILENAME=READY holding a row count (as upstreams write it): not a row of the batch."""
    host = start_host(monkeypatch, gcs_store, {"SUCCESS_FILENAME": "READY"})
    host.upload("f4/j/_config/load.json", b'{"format": "json", "nested": %s}' % nested.encode())
    if ordered:
        host.upload("f4/j/_config/ORDERME")
    host.upload("f4/j/b1/part-0.json", b'{"id": 1}\n{"id": 2}\n')
    generation = host.upload("f4/j/b1/READY", b'{"rows": 2}')
    host.drain()
    assert host.tables.commits["f4/j"] == [("b1", generation)]
    assert data_uris(host, "f4/j") == [[f"gs://{host.bucket}/f4/j/b1/part-0.json"]]
