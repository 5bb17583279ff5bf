"""The emulator's HTTP face: the Dataproc v1 REST paths `google.cloud.dataproc_v1`'s
BatchControllerClient calls with `transport="rest"` (its generated `rest_base.py`):

    POST   /v1/projects/{p}/locations/{r}/batches?batchId=&requestId=    CreateBatch -> Operation
    GET    /v1/projects/{p}/locations/{r}/batches/{id}                   GetBatch
    GET    /v1/projects/{p}/locations/{r}/batches?pageSize=&pageToken=   ListBatches
    DELETE /v1/projects/{p}/locations/{r}/batches/{id}                   DeleteBatch (finished only)
    GET    /v1/projects/{p}/regions/{r}/operations/{op}                  GetOperation
    POST   /v1/projects/{p}/regions/{r}/operations/{op}:cancel           CancelOperation
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from turnstile_dev.dataproc_emulator.batches import ApiError, BatchBook
from turnstile_dev.dataproc_emulator.execution import Executor, Runtime

_NAME = r"[^/:]+"
PARENT = re.compile(rf"/v1/(?P<parent>projects/{_NAME}/locations/{_NAME})/batches")
BATCH = re.compile(rf"/v1/(?P<name>projects/{_NAME}/locations/{_NAME}/batches/{_NAME})")
OPERATION = re.compile(rf"/v1/(?P<name>projects/{_NAME}/(?:regions|locations)/{_NAME}/operations/{_NAME})")
CANCEL = re.compile(rf"{OPERATION.pattern}:cancel")

Route = Callable[[re.Match[str], dict[str, str], str], Any]


class DataprocEmulator:
    """`start()` serves on a free loopback port (or `port`); `url` is then the `api_endpoint`."""

    def __init__(self, runtime: Runtime, *, port: int = 0) -> None:
        self.runtime = runtime
        self.book = BatchBook()
        self.executor = Executor(self.book, runtime)
        self.book.on_create = self.executor.start
        self.url = ""
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._routes: list[tuple[str, re.Pattern[str], Route]] = [
            ("POST", PARENT, self._create),
            ("GET", PARENT, self._list),
            ("GET", BATCH, lambda m, q, b: self.book.get(m["name"])),
            ("DELETE", BATCH, self._delete),
            ("POST", CANCEL, self._cancel),
            ("GET", OPERATION, lambda m, q, b: self.book.operation(m["name"])),
        ]

    def start(self) -> DataprocEmulator:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                emulator._serve(self, "GET")

            def do_POST(self) -> None:
                emulator._serve(self, "POST")

            def do_DELETE(self) -> None:
                emulator._serve(self, "DELETE")

            def log_message(self, *args: object) -> None:
                pass

        self.runtime.root.mkdir(parents=True, exist_ok=True)
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        """Stop serving and kill the batches still running."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.executor.stop()

    def __enter__(self) -> DataprocEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- routes ---------------------------------------------------------------------------------
    def _create(self, match: re.Match[str], query: dict[str, str], body: str) -> Any:
        return self.book.create(match["parent"], body, query.get("batchId"), query.get("requestId"))

    def _list(self, match: re.Match[str], query: dict[str, str], body: str) -> Any:
        try:
            size = int(query.get("pageSize") or 0)
        except ValueError as exc:
            raise ApiError(
                400, "INVALID_ARGUMENT", f"pageSize {query['pageSize']!r} is not a number"
            ) from exc
        return self.book.list(match["parent"], size, query.get("pageToken", ""), query.get("filter", ""))

    def _delete(self, match: re.Match[str], query: dict[str, str], body: str) -> Any:
        answer, _ = self.book.delete(match["name"])
        shutil.rmtree(self.executor.workdir(match["name"]), ignore_errors=True)
        return answer

    def _cancel(self, match: re.Match[str], query: dict[str, str], body: str) -> Any:
        self.executor.cancel(self.book.cancel(match["name"]))
        return {}

    # -- HTTP -----------------------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        path = unquote(url.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length).decode() if length else ""
        code, payload = 404, ApiError(404, "NOT_FOUND", f"no route for {method} {path}").body()
        for verb, pattern, route in self._routes:
            match = pattern.fullmatch(path)
            if verb == method and match:
                try:
                    code, payload = 200, route(match, query, body)
                except ApiError as exc:
                    code, payload = exc.code, exc.body()
                break
        data = json.dumps(payload).encode()
        handler.send_response(code)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
