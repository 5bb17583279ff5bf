"""The GCS adapter retries transient failures with google.api_core and then gives up cleanly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.api_core.retry import Retry
from google.cloud.storage.retry import DEFAULT_RETRY

from turnstile.core.errors import StoreRefused, StoreUnavailable, Terminal, Transient
from turnstile.local.emulator import free_port
from turnstile.store.gcs import GcsStore, make_client


class FlakyStorage(BaseHTTPRequestHandler):
    """Answers `failures` requests with the given status, then object metadata."""

    failures = 0
    status = 503
    seen = 0

    def do_GET(self) -> None:
        cls = type(self)
        cls.seen += 1
        if cls.seen <= cls.failures:
            self.send_response(cls.status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"error": {"code": cls.status, "message": "try later"}}).encode())
            return
        body = json.dumps({"name": "t/a", "bucket": "b", "generation": "7", "size": "3"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[tuple[str, type[FlakyStorage]]]:
    handler = type("Handler", (FlakyStorage,), {"seen": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


FAST: Retry = DEFAULT_RETRY.with_delay(initial=0.01, maximum=0.05).with_timeout(15.0)  # generous under load


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_answers_are_retried_until_success(
    flaky: tuple[str, type[FlakyStorage]], status: int
) -> None:
    url, handler = flaky
    handler.failures, handler.status = 2, status
    store = GcsStore(make_client("local", url), "b", retry=FAST)
    info = store.stat("t/a")
    assert info is not None and info.generation == 7
    assert handler.seen == 3


def test_a_store_that_keeps_failing_becomes_store_unavailable(flaky: tuple[str, type[FlakyStorage]]) -> None:
    url, handler = flaky
    handler.failures, handler.status = 10_000, 503
    store = GcsStore(make_client("local", url), "b", retry=FAST.with_timeout(0.5))
    with pytest.raises(StoreUnavailable) as caught:
        store.stat("t/a")
    assert isinstance(caught.value, Transient)
    assert "gs://b/t/a" in str(caught.value)
    assert handler.seen > 2


def test_an_unreachable_store_becomes_store_unavailable() -> None:
    store = GcsStore(
        make_client("local", f"http://127.0.0.1:{free_port()}"), "b", retry=FAST.with_timeout(0.5)
    )
    with pytest.raises(StoreUnavailable):
        store.read("t/a")


@pytest.mark.parametrize(
    ("status", "hint"),
    # 401: the client refreshes its credentials, which the emulator's anonymous ones cannot.
    [(403, "refused access"), (401, "refused the credentials"), (400, "rejected the request")],
)
def test_a_refusal_is_a_terminal_error_naming_the_object_and_what_to_do(
    flaky: tuple[str, type[FlakyStorage]], status: int, hint: str
) -> None:
    url, handler = flaky
    handler.failures, handler.status = 10_000, status
    store = GcsStore(make_client("local", url), "b", retry=FAST)
    for call in (lambda: store.stat("t/a"), lambda: store.read("t/a"), lambda: store.list_objects("t/")):
        before = handler.seen
        with pytest.raises(StoreRefused) as caught:
            call()
        assert handler.seen - before <= 2  # refused at once: not retried (a retry loop makes dozens)
        assert isinstance(caught.value, Terminal)
        message = str(caught.value)
        assert "gs://b/t/" in message and hint in message
        assert "; " in message  # <what went wrong>; <what to do>
    assert {403: "roles/storage.objectUser", 401: "gcloud auth", 400: "object name"}[status] in message
