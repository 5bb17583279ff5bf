"""The local event bridge delivers events for every name GCS allows, and its senders never die.

The bridge watches a fake-gcs-server bucket and POSTs CloudEvents over HTTP to a real
functions-framework host serving functions/main.py (a werkzeug server in a thread), exactly as the
local stack runs it. Folder names with CJK letters, spaces and `%` must reach the handler unchanged.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from cloudevents.conversion import to_binary, to_structured
from cloudevents.http import CloudEvent
from functions_framework import create_app
from werkzeug.serving import make_server

from tests.functional.harness import EVENT_TYPE, ROOT, Host, start_host
from turnstile.local import bridge
from turnstile.local.bridge import EventBridge, wait_until
from turnstile.store.gcs import GcsStore

TABLE = "ds/tbl"
NAMES = ["日本 语", "50% off 100%20", "naïve ünïcödé ✓"]


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore) -> Host:
    return start_host(monkeypatch, gcs_store)


@pytest.fixture
def function_url(host: Host) -> Iterator[str]:
    """functions/main.py served over HTTP by functions-framework, wired to the host's store."""
    app = create_app(
        target="on_object_finalized", source=str(ROOT / "functions" / "main.py"), signature_type="cloudevent"
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    thread.join(timeout=5)


def bridge_for(host: Host, url: str, tmp_path: Path, **kwargs: object) -> EventBridge:
    return EventBridge(host.store.inner, url, tmp_path / "seen.json", interval=0.05, **kwargs)  # type: ignore[arg-type]


def test_names_with_any_utf8_spaces_and_percent_reach_the_handler_exactly(
    host: Host, function_url: str, tmp_path: Path
) -> None:
    generations = {rel: host.put_batch(f"{TABLE}/{rel}") for rel in NAMES}
    bridge = bridge_for(host, function_url, tmp_path)
    bridge.start()
    try:
        assert wait_until(lambda: len(host.tables.commits.get(TABLE, [])) == len(NAMES), 30, 0.1)
        assert wait_until(bridge.idle, 30, 0.1)
    finally:
        bridge.stop()
    assert sorted(host.tables.commits[TABLE]) == sorted(generations.items())
    assert not [r for r in host.log_records() if r["severity"] == "ERROR"]


def test_a_sender_that_hits_an_error_logs_it_and_keeps_delivering(
    host: Host, function_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure that used to kill a sender silently: encoding the event raises (as binary mode's
    headers did for a UTF-8 name). The one sender logs it, names the object, and goes on."""
    broken = f"{TABLE}/日本 语/_SUCCESS"
    encode = bridge.to_structured

    def failing_for_one_name(event: CloudEvent) -> tuple[dict[str, str], bytes]:
        if event["subject"] == f"objects/{broken}":
            raise UnicodeEncodeError("latin-1", broken, 7, 9, "ordinal not in range(256)")
        return encode(event)

    monkeypatch.setattr(bridge, "to_structured", failing_for_one_name)
    generations = {rel: host.put_batch(f"{TABLE}/{rel}") for rel in NAMES}
    events = bridge_for(host, function_url, tmp_path, senders=1)
    events.start()
    try:
        assert wait_until(lambda: len(host.tables.commits.get(TABLE, [])) == len(NAMES) - 1, 30, 0.1)
        later = host.put_batch(f"{TABLE}/after")  # the single sender is still alive
        assert wait_until(lambda: ("after", later) in host.tables.commits[TABLE], 30, 0.1)
        assert wait_until(events.idle, 30, 0.1)
    finally:
        events.stop()
    assert sorted(host.tables.commits[TABLE]) == sorted(
        [(rel, g) for rel, g in generations.items() if rel != "日本 语"] + [("after", later)]
    )
    [error] = [r for r in host.log_records() if r.get("event") == "event_undeliverable"]
    assert error["severity"] == "ERROR"
    assert error["object"] == f"gs://{host.bucket}/{broken}"
    assert "UnicodeEncodeError" in error["message"]
    assert f"turnstile backfill gs://{host.bucket}/{TABLE}/日本 语" in error["message"]


def test_why_structured_mode_functions_framework_does_not_decode_percent_encoded_headers(
    tmp_path: Path,
) -> None:
    """The choice the bridge makes, proven on functions-framework itself: a binary-mode event
    needs its `ce-subject` percent-encoded to carry UTF-8, and arrives still encoded; the same
    event in structured mode arrives exactly."""
    source, seen = tmp_path / "main.py", tmp_path / "subjects.json"
    source.write_text(
        "import json, pathlib, functions_framework\n"
        "@functions_framework.cloud_event\n"
        "def record(event):\n"
        f"    path = pathlib.Path({str(seen)!r})\n"
        "    found = json.loads(path.read_text()) if path.exists() else []\n"
        "    path.write_text(json.dumps([*found, event['subject']]))\n"
    )
    app = create_app(target="record", source=str(source), signature_type="cloudevent")
    client = app.test_client()
    subject = f"objects/{TABLE}/日本 语/50% off/_SUCCESS"
    event = CloudEvent({"type": EVENT_TYPE, "source": "//storage.googleapis.com/x", "subject": subject}, {})
    with pytest.raises(UnicodeEncodeError):
        to_binary(event)[0]["ce-subject"].encode("latin-1")  # what an HTTP client must send
    encoded = CloudEvent(
        {"type": EVENT_TYPE, "source": "//storage.googleapis.com/x", "subject": quote(subject, safe="/ ")}, {}
    )
    for mode in (to_binary, to_structured):
        headers, body = mode(encoded if mode is to_binary else event)
        assert client.post("/", headers=headers, data=body).status_code == 200
    assert json.loads(seen.read_text()) == [quote(subject, safe="/ "), subject]
