"""The Dataproc emulator's API through google-cloud-dataproc's REST client, with batches that fail
before any Spark starts (their main file is missing): ids, request ids, states, operations."""

from __future__ import annotations

import time

import pytest
from google.api_core import exceptions as gexc
from google.cloud import dataproc_v1

from turnstile.jobs.dataproc import DataprocBatchSpec, DataprocRunner, _already_exists, make_client
from turnstile_dev.dataproc_emulator import DataprocEmulator
from turnstile_dev.dataproc_emulator.batches import ApiError, BatchBook

pytestmark = pytest.mark.emulator

PARENT = "projects/local/locations/europe-west1"


def _batch(main: str = "gs://deploy-nowhere/job/main.py") -> dataproc_v1.Batch:
    return dataproc_v1.Batch(pyspark_batch=dataproc_v1.PySparkBatch(main_python_file_uri=main, args=["--x"]))


def _create(client: dataproc_v1.BatchControllerClient, batch_id: str, request_id: str) -> str:
    request = dataproc_v1.CreateBatchRequest(
        parent=PARENT, batch=_batch(), batch_id=batch_id, request_id=request_id
    )
    return str(client.create_batch(request=request).operation.name)


def _finished(client: dataproc_v1.BatchControllerClient, name: str) -> dataproc_v1.Batch:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        batch = client.get_batch(name=name)
        if batch.state in (batch.State.SUCCEEDED, batch.State.FAILED, batch.State.CANCELLED):
            return batch
        time.sleep(0.1)
    raise AssertionError(f"{name} did not finish")


def test_request_ids_and_existing_batch_ids(dataproc_emulator: DataprocEmulator) -> None:
    client = make_client("europe-west1", dataproc_emulator.url)
    first = _create(client, "api-ids-1", "req-1")
    assert _create(client, "api-ids-1", "req-1") == first  # a retry of the same request
    assert _create(client, "api-ids-other", "req-1") == first  # the request id wins, as documented
    with pytest.raises(gexc.Conflict) as caught:
        _create(client, "api-ids-1", "req-2")
    assert _already_exists(caught.value)  # the runner attaches
    assert caught.value.response.json()["error"]["status"] == "ALREADY_EXISTS"
    with pytest.raises(gexc.BadRequest, match="Invalid batch id"):
        _create(client, "Not_An_Id", "req-3")


def test_a_batch_whose_files_are_missing_fails_and_can_be_listed_and_deleted(
    dataproc_emulator: DataprocEmulator,
) -> None:
    client = make_client("europe-west1", dataproc_emulator.url)
    operation = _create(client, "api-missing-main", "req-missing")
    batch = _finished(client, f"{PARENT}/batches/api-missing-main")
    assert batch.state == batch.State.FAILED
    assert "gs://deploy-nowhere/job/main.py not found" in batch.state_message
    assert batch.operation == operation
    done = client.get_operation(request={"name": operation})
    assert done.done and done.error.code == 2 and "not found" in done.error.message
    with pytest.raises(gexc.BadRequest, match="is done"):
        client.cancel_operation(request={"name": operation})
    listed = [b.name for b in client.list_batches(parent=PARENT)]
    assert batch.name in listed
    client.delete_batch(name=batch.name)
    with pytest.raises(gexc.NotFound):
        client.get_batch(name=batch.name)


def test_a_batch_is_deleted_only_once_finished_and_cancelled_before_it_starts() -> None:
    book = BatchBook()  # nothing runs its batches: they stay PENDING
    body = dataproc_v1.Batch.to_json(_batch())
    book.create(PARENT, body, "api-pending", None)
    name = f"{PARENT}/batches/api-pending"
    with pytest.raises(ApiError) as caught:
        book.delete(name)
    assert caught.value.status == "FAILED_PRECONDITION"
    operation = book.entries[name].operation
    assert book.cancel(operation) == name
    assert book.state(name) == dataproc_v1.Batch.State.CANCELLING
    assert not book.move(name, dataproc_v1.Batch.State.RUNNING)  # a cancelled batch never runs
    assert book.move(name, dataproc_v1.Batch.State.CANCELLED, "cancelled")
    assert book.operation(operation)["error"]["code"] == 1


def test_unknown_fields_and_other_batch_kinds_are_refused() -> None:
    book = BatchBook()
    with pytest.raises(ApiError, match="Invalid JSON payload"):
        book.create(
            PARENT, '{"pysparkBatch": {"mainPythonFileUri": "gs://b/m.py"}, "colour": 1}', "api-x", None
        )
    with pytest.raises(ApiError, match="PySpark batches only"):
        book.create(PARENT, '{"sparkBatch": {"mainClass": "Main"}}', "api-y", None)


def test_a_batch_finishing_between_the_runners_describe_and_its_cancel_is_left_alone(
    dataproc_emulator: DataprocEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over REST, Dataproc's 400 FAILED_PRECONDITION ("the operation is done") arrives as a bare
    # BadRequest, not as FailedPrecondition: the cancel must still see a job that already ended.
    client = make_client("europe-west1", dataproc_emulator.url)
    spec = DataprocBatchSpec(main_python_file_uri="gs://deploy-nowhere/job/main.py")
    runner = DataprocRunner(client, "local", "europe-west1", spec)
    _create(client, "api-cancel-race", "req-cancel-race")
    ended = _finished(client, f"{PARENT}/batches/api-cancel-race")
    assert ended.state == ended.State.FAILED
    as_described = dataproc_v1.Batch(ended)
    as_described.state = dataproc_v1.Batch.State.RUNNING  # what the describe saw, just before it ended
    monkeypatch.setattr(runner, "_get", lambda job_id, what: as_described)
    runner.cancel("api-cancel-race")  # no JobError: the batch ended on its own
