"""The Batches API's state: batches, their operations, request ids, and the state machine
PENDING -> RUNNING -> SUCCEEDED | FAILED, with CANCELLING -> CANCELLED on a cancel.

Resources are the client library's own messages (`dataproc_v1.Batch`, `BatchOperationMetadata`),
so what the emulator answers has the API's shape by construction. Errors are `ApiError`s carrying
the HTTP code and the canonical status the API answers with.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.cloud import dataproc_v1

State = dataproc_v1.Batch.State
FINISHED = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})
BATCH_ID = re.compile(r"[a-z0-9-]{4,63}")  # projects.locations.batches.create: batchId
REQUEST_ID = re.compile(r"[a-zA-Z0-9_-]{1,40}")
BATCH_TYPE = "type.googleapis.com/google.cloud.dataproc.v1.Batch"
METADATA_TYPE = "type.googleapis.com/google.cloud.dataproc.v1.BatchOperationMetadata"


class ApiError(Exception):
    """An error answer: Google's JSON error `{"error": {"code", "message", "status"}}`."""

    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "status": self.status}}


def not_found(what: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"Not found: {what}")


@dataclass
class Entry:
    batch: dataproc_v1.Batch
    operation: str
    request_id: str
    cancel_requested: bool = False


@dataclass
class BatchBook:
    """Every batch created, by full name; `on_create` starts running one (outside the lock)."""

    on_create: Callable[[dataproc_v1.Batch], None] = lambda batch: None
    entries: dict[str, Entry] = field(default_factory=dict)
    _requests: dict[tuple[str, str], str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the API's methods ------------------------------------------------------------------------
    def create(self, parent: str, body: str, batch_id: str | None, request_id: str | None) -> dict[str, Any]:
        """CreateBatch: the operation (as JSON) of a new batch, or of the batch `request_id` created."""
        batch = _parse(body)
        batch_id = batch_id or uuid.uuid4().hex
        if not BATCH_ID.fullmatch(batch_id):
            raise ApiError(
                400, "INVALID_ARGUMENT", f"Invalid batch id {batch_id!r}: 4-63 characters of [a-z0-9-]"
            )
        if request_id is not None and not REQUEST_ID.fullmatch(request_id):
            raise ApiError(
                400, "INVALID_ARGUMENT", f"Invalid request id {request_id!r}: 1-40 of [a-zA-Z0-9_-]"
            )
        name = f"{parent}/batches/{batch_id}"
        with self._lock:
            if request_id and (parent, request_id) in self._requests:
                return self._operation(self.entries[self._requests[(parent, request_id)]])
            if name in self.entries:
                raise ApiError(409, "ALREADY_EXISTS", f"Batch {name} already exists")
            project, region = parent.split("/")[1], parent.split("/")[3]
            now = datetime.now(UTC)
            batch.name, batch.uuid = name, str(uuid.uuid4())
            batch.create_time = batch.state_time = now
            batch.state = State(State.PENDING)
            batch.creator = "emulator@localhost"
            entry = Entry(
                batch, f"projects/{project}/regions/{region}/operations/{batch.uuid}", request_id or ""
            )
            batch.operation = entry.operation
            self.entries[name] = entry
            if request_id:
                self._requests[(parent, request_id)] = name
            answer = self._operation(entry)
            created = dataproc_v1.Batch(batch)
        self.on_create(created)
        return answer

    def get(self, name: str) -> dict[str, Any]:
        with self._lock:
            return _batch_json(self._entry(name).batch)

    def list(self, parent: str, page_size: int, page_token: str, filter_: str) -> dict[str, Any]:
        """ListBatches, newest first (the API's default order); no filter language."""
        if filter_:
            raise ApiError(400, "INVALID_ARGUMENT", f"the emulator does not filter batches ({filter_!r})")
        with self._lock:
            found = [e.batch for e in self.entries.values() if e.batch.name.startswith(f"{parent}/batches/")]
            found.sort(key=lambda b: (b.create_time, b.name), reverse=True)
            start = int(page_token or 0)
            size = page_size if 0 < page_size <= 1000 else 100
            page = [_batch_json(b) for b in found[start : start + size]]
        more = start + size < len(found)
        return {"batches": page, **({"nextPageToken": str(start + size)} if more else {})}

    def delete(self, name: str) -> tuple[dict[str, Any], str]:
        """DeleteBatch: only a finished batch; returns the answer and the batch's uuid."""
        with self._lock:
            entry = self._entry(name)
            if entry.batch.state not in FINISHED:
                raise ApiError(
                    400,
                    "FAILED_PRECONDITION",
                    f"Batch {name} is {entry.batch.state.name}: only a finished batch can be deleted",
                )
            del self.entries[name]
            return {}, entry.batch.uuid

    def operation(self, name: str) -> dict[str, Any]:
        with self._lock:
            return self._operation(self._by_operation(name))

    def cancel(self, name: str) -> str:
        """CancelOperation: the batch goes CANCELLING (PENDING ones CANCELLED at once by the caller);
        returns the batch's name."""
        with self._lock:
            entry = self._by_operation(name)
            if entry.batch.state in FINISHED:
                raise ApiError(
                    400,
                    "FAILED_PRECONDITION",
                    f"Operation {name} is done: batch {entry.batch.name} is {entry.batch.state.name}",
                )
            entry.cancel_requested = True
            if entry.batch.state != State.CANCELLING:
                self._move(entry, State.CANCELLING, "")
            return entry.batch.name

    # -- the executor's side --------------------------------------------------------------------
    def move(self, name: str, state: int, message: str = "", output_uri: str = "") -> bool:
        """Record a state change; False (and nothing changed) when the batch has finished or is gone,
        or when it is being cancelled and `state` is not where a cancel ends."""
        with self._lock:
            entry = self.entries.get(name)
            if entry is None or entry.batch.state in FINISHED:
                return False
            if entry.cancel_requested and state not in FINISHED:
                return False
            if output_uri:
                entry.batch.runtime_info.output_uri = output_uri
            self._move(entry, state, message)
            return True

    def cancel_requested(self, name: str) -> bool:
        with self._lock:
            entry = self.entries.get(name)
            return entry is None or entry.cancel_requested

    def state(self, name: str) -> State:
        with self._lock:
            return self._entry(name).batch.state

    # -- inside the lock ------------------------------------------------------------------------
    def _move(self, entry: Entry, state: int, message: str) -> None:
        batch = entry.batch
        now = datetime.now(UTC)
        batch.state_history.append(
            dataproc_v1.Batch.StateHistory(
                state=batch.state, state_message=batch.state_message, state_start_time=batch.state_time
            )
        )
        batch.state, batch.state_message, batch.state_time = State(state), message, now

    def _entry(self, name: str) -> Entry:
        entry = self.entries.get(name)
        if entry is None:
            raise not_found(f"Batch {name}")
        return entry

    def _by_operation(self, name: str) -> Entry:
        wanted = name.replace("/locations/", "/regions/", 1)
        for entry in self.entries.values():
            if entry.operation == wanted:
                return entry
        raise not_found(f"Operation {name}")

    def _operation(self, entry: Entry) -> dict[str, Any]:
        batch = entry.batch
        metadata = dataproc_v1.BatchOperationMetadata(
            batch=batch.name,
            batch_uuid=batch.uuid,
            create_time=batch.create_time,
            operation_type=dataproc_v1.BatchOperationMetadata.BatchOperationType.BATCH,
            description=f"Batch {batch.name.rsplit('/', 1)[-1]}",
            labels=dict(batch.labels),
        )
        if batch.state in FINISHED:
            metadata.done_time = batch.state_time
        answer: dict[str, Any] = {
            "name": entry.operation,
            "metadata": {"@type": METADATA_TYPE, **_json(dataproc_v1.BatchOperationMetadata, metadata)},
        }
        if batch.state == State.SUCCEEDED:
            answer.update(done=True, response={"@type": BATCH_TYPE, **_batch_json(batch)})
        elif batch.state == State.FAILED:  # google.rpc.Code: 2 UNKNOWN, 1 CANCELLED
            answer.update(done=True, error={"code": 2, "message": batch.state_message})
        elif batch.state == State.CANCELLED:
            answer.update(done=True, error={"code": 1, "message": batch.state_message or "Cancelled"})
        return answer


def _parse(body: str) -> dataproc_v1.Batch:
    """The Batch of a create request, refused as the API refuses it: unknown fields, no PySpark
    batch (the only kind the emulator runs), no main file."""
    try:
        batch: dataproc_v1.Batch = dataproc_v1.Batch.from_json(body or "{}")
    except Exception as exc:  # json_format.ParseError or a JSON syntax error
        raise ApiError(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {exc}") from exc
    if "pyspark_batch" not in batch:
        raise ApiError(400, "INVALID_ARGUMENT", "the emulator runs PySpark batches only: set pysparkBatch")
    main = batch.pyspark_batch.main_python_file_uri
    if not main.endswith(".py"):
        raise ApiError(
            400, "INVALID_ARGUMENT", f"pysparkBatch.mainPythonFileUri must be a .py file, got {main!r}"
        )
    return batch


def _json(kind: Any, message: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(kind.to_json(message, use_integers_for_enums=False))
    return parsed


def _batch_json(batch: dataproc_v1.Batch) -> dict[str, Any]:
    return _json(dataproc_v1.Batch, batch)
