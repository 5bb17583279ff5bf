"""The local event bridge keeps what was written while the function hosts were down, as Eventarc's
retention does: it retries with capped backoff until the host answers, keeps undelivered events
across a restart of the stack, and logs ERROR only when the retention runs out.

The host is functions/main.py served by functions-framework over HTTP (a werkzeug server in a
thread); "down" is its port closed, nothing listening."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from functions_framework import create_app
from werkzeug.serving import make_server

from tests.functional.harness import ROOT, Host, start_host
from turnstile.local.bridge import EventBridge, wait_until
from turnstile.store.gcs import GcsStore

TABLE = "ds/tbl"


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore) -> Host:
    return start_host(monkeypatch, gcs_store)


def closed_port() -> int:
    """A port nothing listens on (yet): connecting to it is refused, as to a host that is down."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def function_host_on(port: int) -> Iterator[None]:
    """functions/main.py served by functions-framework on `port` until the block ends."""
    app = create_app(
        target="on_object_finalized", source=str(ROOT / "functions" / "main.py"), signature_type="cloudevent"
    )
    server = make_server("127.0.0.1", port, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        thread.join(timeout=5)


def bridge_for(host: Host, port: int, state: Path, **kwargs: float) -> EventBridge:
    return EventBridge(
        host.store.inner,  # type: ignore[arg-type]
        f"http://127.0.0.1:{port}/",
        state,
        interval=0.05,
        max_backoff=0.2,
        **kwargs,
    )


def pending(state: Path) -> list[str]:
    path = state.with_name(f"{state.stem}.pending.json")
    return [entry["name"] for entry in json.loads(path.read_text())] if path.exists() else []


def settled(host: Host, bridge: EventBridge) -> bool:
    """The table's job has ended and its end was handled (no open-job marker left), and the bridge has
    nothing in flight or new in the bucket: the host's own writes after a commit (the job's done
    signal, its result) are events too, delivered before the test looks at `pending`."""
    store = host.store.inner
    ended = any(o.name.endswith(".done") for o in store.list_objects(f"{TABLE}/_turnstile/jobs/"))
    handled = not store.list_objects(f"{TABLE}/_turnstile/open/")
    return ended and handled and bridge.idle() and bridge.poll_once() == 0 and bridge.idle()


def errors(host: Host) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r["severity"] == "ERROR"]


def test_a_batch_written_while_the_host_is_down_is_applied_when_it_comes_up(
    host: Host, tmp_path: Path
) -> None:
    port, state = closed_port(), tmp_path / "seen.json"
    bridge = bridge_for(host, port, state)
    bridge.start()
    try:
        generation = host.put_batch(f"{TABLE}/while-down")
        assert wait_until(lambda: f"{TABLE}/while-down/_SUCCESS" in pending(state), 60, 0.05)
        # Refused many times over (two events), well past the 8 attempts after which the bridge used
        # to give up on each: nothing delivered, nothing given up.
        assert wait_until(lambda: bridge.refused >= 30, 120, 0.1)
        assert bridge.delivered == 0
        assert not bridge.idle() and not errors(host)
        with function_host_on(port):
            assert wait_until(
                lambda: host.tables.commits.get(TABLE) == [("while-down", generation)], 120, 0.1
            )
            assert wait_until(lambda: settled(host, bridge), 120, 0.1)
    finally:
        bridge.stop()
    assert not errors(host)
    assert pending(state) == []


def test_a_restarted_stack_delivers_what_was_not_delivered_before_it_stopped(
    host: Host, tmp_path: Path
) -> None:
    port, state = closed_port(), tmp_path / "seen.json"
    first = bridge_for(host, port, state)
    first.start()
    try:
        generation = host.put_batch(f"{TABLE}/before-stop")
        assert wait_until(lambda: f"{TABLE}/before-stop/_SUCCESS" in pending(state), 60, 0.05)
    finally:
        first.stop()
    assert f"{TABLE}/before-stop/_SUCCESS" in pending(state)  # kept for the next start
    assert not errors(host)  # stopping is not giving up
    with function_host_on(port):
        second = bridge_for(host, port, state)
        second.start()
        try:
            # The bucket listing shows nothing new (the first bridge saw it all): the saved events are
            # what delivers it.
            assert wait_until(
                lambda: host.tables.commits.get(TABLE) == [("before-stop", generation)], 30, 0.1
            )
            assert wait_until(lambda: settled(host, second), 120, 0.1)
        finally:
            second.stop()
    assert not errors(host)
    assert pending(state) == []


def test_only_an_event_past_its_retention_is_logged_as_undeliverable(host: Host, tmp_path: Path) -> None:
    port, state = closed_port(), tmp_path / "seen.json"
    bridge = bridge_for(host, port, state, retention=1.0)
    bridge.start()
    try:
        host.put_batch(f"{TABLE}/never")
        assert wait_until(lambda: f"{TABLE}/never/_SUCCESS" in pending(state), 60, 0.05)
        assert not errors(host)  # retrying within the retention: nothing to report yet
        assert wait_until(bridge.idle, 120, 0.1)
    finally:
        bridge.stop()
    failures = [r for r in errors(host) if r.get("event") == "event_undeliverable"]
    assert {r["object"] for r in failures} == {
        f"gs://{host.bucket}/{TABLE}/never/part-0.csv",
        f"gs://{host.bucket}/{TABLE}/never/_SUCCESS",
    }
    message = next(str(r["message"]) for r in failures if str(r["object"]).endswith("_SUCCESS"))
    assert "within the retention of 1 s" in message
    assert f"turnstile backfill gs://{host.bucket}/{TABLE}/never" in message
    assert pending(state) == []
    assert TABLE not in host.tables.commits
