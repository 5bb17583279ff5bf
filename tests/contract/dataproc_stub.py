"""A tiny in-process stand-in for the Dataproc Batches REST API (v1), enough for `DataprocRunner`.

It answers the paths `google.cloud.dataproc_v1`'s REST transport calls (taken from the library's
generated `rest_base.py` http options):

- `POST /v1/projects/{p}/locations/{r}/batches?batchId=..&requestId=..` (body: the Batch) ->
  a long-running Operation `projects/{p}/regions/{r}/operations/op-N` whose metadata names the
  batch; `409 ALREADY_EXISTS` when the batch id exists. With `remember_request_ids`, a repeated
  request id gets the first operation back instead, as the API documents for `request_id`.
- `GET /v1/projects/{p}/locations/{r}/batches/{id}` -> the Batch with its current state, or 404.
- `POST /v1/projects/{p}/regions/{r}/operations/{op}:cancel` -> `{}`; the batch goes CANCELLING.

Ids are checked as the API documents them (`projects.locations.batches.create`): `batchId` must be
4-63 characters of `[a-z0-9-]` (the stub also wants RFC 1035's shape, a letter first and no hyphen
last, which resource ids on Google Cloud commonly require: an id valid here is valid in any
reading), `requestId` at most 40 characters of `[a-zA-Z0-9_-]`; anything else is answered
`400 INVALID_ARGUMENT`, as the API does. turnstile always names its batches, so the stub does not
generate ids: a create without `batchId` is a 400 too.

Errors use Google's JSON error shape `{"error": {"code", "message", "status"}}`. `fail(...)`
queues answers (e.g. 503s) that are returned before any request is served normally. Every request
is recorded (method, path, query, JSON body).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BATCHES = re.compile(r"/v1/projects/(?P<p>[^/]+)/locations/(?P<r>[^/]+)/batches")
BATCH = re.compile(r"/v1/projects/(?P<p>[^/]+)/locations/(?P<r>[^/]+)/batches/(?P<id>[^/:]+)")
CANCEL = re.compile(r"/v1/(?P<op>projects/[^/]+/(?:regions|locations)/[^/]+/operations/[^/:]+):cancel")
STATUS_NAMES = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS"}
FINISHED = {"CANCELLED", "SUCCEEDED", "FAILED"}
BATCH_ID = re.compile(r"[a-z][a-z0-9-]{2,61}[a-z0-9]")
REQUEST_ID = re.compile(r"[a-zA-Z0-9_-]{1,40}")


def invalid_ids(batch_id: str, request_id: str | None) -> str | None:
    """Why the API would refuse these ids (None when it accepts them)."""
    if not BATCH_ID.fullmatch(batch_id):
        return f"Invalid batch id {batch_id!r}: it must be 4-63 characters of [a-z0-9-]"
    if request_id is not None and not REQUEST_ID.fullmatch(request_id):
        return f"Invalid request id {request_id!r}: at most 40 characters of [a-zA-Z0-9_-]"
    return None


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass
class StoredBatch:
    resource: dict[str, Any]  # the Batch as created, plus the output-only fields
    operation: str
    request_id: str


@dataclass
class DataprocStub:
    """The API's state and the recorded requests; `url` is set once `start()` has run."""

    remember_request_ids: bool = False
    batches: dict[str, StoredBatch] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    _failures: deque[tuple[int, str, str]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _operations: int = 0

    # -- programming the stub -------------------------------------------------------------------
    def fail(
        self, times: int, code: int = 503, status: str = "UNAVAILABLE", message: str = "try later"
    ) -> None:
        """Answer the next `times` requests with this error."""
        with self._lock:
            self._failures.extend([(code, status, message)] * times)

    def set_state(self, batch_id: str, state: str, message: str = "") -> None:
        with self._lock:
            resource = self.batches[batch_id].resource
            resource["state"] = state
            if message:
                resource["stateMessage"] = message

    def add_batch(self, project: str, region: str, batch_id: str, state: str = "PENDING") -> None:
        """A batch created behind turnstile's back (another process, an earlier run)."""
        with self._lock:
            self._store(project, region, batch_id, {}, request_id="")
        self.set_state(batch_id, state)

    def pending(self) -> list[str]:
        """Ids of the batches still PENDING: the ones a test may play (see `play`)."""
        with self._lock:
            return [b for b, stored in self.batches.items() if stored.resource["state"] == "PENDING"]

    def manifest_of(self, batch_id: str) -> str:
        """The `--manifest` argument the batch was created with."""
        with self._lock:
            args: list[str] = self.batches[batch_id].resource["pysparkBatch"]["args"]
        return args[args.index("--manifest") + 1]

    def sent(self, method: str, pattern: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.method == method and re.fullmatch(pattern, r.path)]

    # -- serving --------------------------------------------------------------------------------
    def start(self) -> DataprocStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stub._serve(self, "GET")

            def do_POST(self) -> None:
                stub._serve(self, "POST")

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll interval: `shutdown()` waits up to one interval (0.5 s by default) per test.
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _store(self, project: str, region: str, batch_id: str, body: dict[str, Any], request_id: str) -> str:
        self._operations += 1
        operation = f"projects/{project}/regions/{region}/operations/op-{self._operations}"
        resource = dict(body)
        resource.update(
            name=f"projects/{project}/locations/{region}/batches/{batch_id}",
            uuid=f"uuid-{batch_id}",
            state="PENDING",
            operation=operation,
            createTime="2024-05-01T13:00:00Z",
        )
        self.batches[batch_id] = StoredBatch(resource, operation, request_id)
        return operation

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with self._lock:
            self.requests.append(Recorded(method, url.path, query, body))
            if self._failures:
                code, status, message = self._failures.popleft()
                answer = _status(code, message, status)
            else:
                answer = self._answer(method, url.path, query, body)
        _send(handler, *answer)

    def _answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if method == "POST" and (m := BATCHES.fullmatch(path)):
            batch_id, request_id = query.get("batchId", ""), query.get("requestId", "")
            refused = invalid_ids(batch_id, query.get("requestId"))
            if refused is not None:
                return _status(400, refused)
            existing = self.batches.get(batch_id)
            if existing is not None:
                if self.remember_request_ids and request_id and request_id == existing.request_id:
                    return 200, _operation(existing.operation, existing.resource["name"])
                return _status(409, f"Batch {existing.resource['name']} already exists")
            operation = self._store(m["p"], m["r"], batch_id, body or {}, request_id)
            return 200, _operation(operation, self.batches[batch_id].resource["name"])
        if method == "GET" and (m := BATCH.fullmatch(path)):
            found = self.batches.get(m["id"])
            if found is None:
                return _status(404, f"Not found: Batch {path.removeprefix('/v1/')}")
            return 200, found.resource
        if method == "POST" and (m := CANCEL.fullmatch(path)):
            for stored in self.batches.values():
                if stored.operation == m["op"]:
                    if stored.resource["state"] in FINISHED:
                        return _status(400, "operation is already done", "FAILED_PRECONDITION")
                    stored.resource["state"] = "CANCELLING"
                    return 200, {}
            return _status(404, f"operation {m['op']} not found")
        return _status(404, f"no route for {method} {path}")


def _operation(name: str, batch: str) -> dict[str, Any]:
    return {
        "name": name,
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.dataproc.v1.BatchOperationMetadata",
            "batch": batch,
            "batchUuid": f"uuid-{batch.rsplit('/', 1)[-1]}",
            "operationType": "BATCH",
        },
    }


def _status(code: int, message: str, status: str | None = None) -> tuple[int, Any]:
    return code, {"error": {"code": code, "message": message, "status": status or STATUS_NAMES[code]}}


def _send(handler: BaseHTTPRequestHandler, code: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
