"""What the GCS adapter sends: the requests real GCS judges, recorded by a local HTTP server.

fake-gcs-server ignores `ifGenerationMatch` on DELETE, so the emulator cannot show that real GCS
would refuse a stale delete; this shows the adapter asks for exactly that precondition, and that it
does not take the emulator's write lock when it talks to GCS."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from turnstile.core.errors import PreconditionFailed
from turnstile.store.gcs import GcsStore, make_client


class Recording(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, dict[str, list[str]]]]
    answer = 204

    def do_DELETE(self) -> None:
        url = urlparse(self.path)
        type(self).requests.append(("DELETE", url.path, parse_qs(url.query)))
        self.send_response(type(self).answer)
        self.send_header("Content-Type", "application/json")
        body = b'{"error": {"code": 412, "message": "conditionNotMet"}}' if type(self).answer == 412 else b""
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # the read after a conflict: the object is gone
        type(self).requests.append(("GET", urlparse(self.path).path, {}))
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gcs() -> Iterator[tuple[str, type[Recording]]]:
    handler = type("Handler", (Recording,), {"requests": [], "answer": 204})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


def test_a_conditional_delete_asks_gcs_for_the_generation(gcs: tuple[str, type[Recording]]) -> None:
    url, handler = gcs
    store = GcsStore(make_client("p", url), "bkt")
    store.delete("ds/tbl/_backlog/01/_SUCCESS", if_generation=1234)
    [(method, path, query)] = [r for r in handler.requests if r[0] == "DELETE"]
    assert method == "DELETE" and path.endswith("/b/bkt/o/ds%2Ftbl%2F_backlog%2F01%2F_SUCCESS")
    assert query["ifGenerationMatch"] == ["1234"]


def test_gcs_refusing_the_precondition_is_a_failed_precondition(gcs: tuple[str, type[Recording]]) -> None:
    url, handler = gcs
    handler.answer = 412
    store = GcsStore(make_client("p", url), "bkt")
    with pytest.raises(PreconditionFailed) as failed:
        store.delete("ds/tbl/_backlog/01/_SUCCESS", if_generation=1234)
    assert failed.value.expected == 1234 and failed.value.found is None
