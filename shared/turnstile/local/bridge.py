"""Event delivery for the local stack: what Eventarc does for a real bucket.

fake-gcs-server can only publish object events to a Pub/Sub emulator, which does not exist on a
machine without the gcloud SDK, so the bridge watches the bucket itself: it lists it a few times a
second, and every object whose generation it has not seen becomes a
`google.cloud.storage.object.v1.finalized` CloudEvent POSTed to the function host — the objects the
functions write themselves included. Delivery is asynchronous and at least once: a pool of senders
posts each event, and an answer other than 2xx is retried with backoff, as Eventarc does with
retries on, up to a limit (then logged and dropped, never retried forever).

Events go in structured mode (the whole event as one JSON body), not binary mode: binary mode puts
`subject` (`objects/<name>`) into a `ce-subject` header, which cannot carry a name with non-ASCII
letters unless percent-encoded, and functions-framework 3.10 (cloudevents 1.12) does not decode
percent-encoded `ce-*` headers, so `%` and UTF-8 in a name would arrive mangled. Structured mode
carries any name GCS allows (any UTF-8, spaces, `%`) exactly. A sender never dies on an error:
the delivery is logged (ERROR, naming the object) and dropped, and the sender takes the next one.

A listing sees every object but not every intermediate generation of an object rewritten faster
than the poll interval (the lock, `_BACKFILL`); the protocol never depends on those, because each
state object is read afresh by whoever the last event wakes. What was seen is saved in the stack's
home, so a restarted stack does not deliver its whole bucket again.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests
from cloudevents.conversion import to_structured
from cloudevents.http import CloudEvent

from turnstile import logs
from turnstile.errors import StoreUnavailable
from turnstile.store.port import ObjectStore

EVENT_TYPE = "google.cloud.storage.object.v1.finalized"
log = logs.get("bridge")


def cloud_event(bucket: str, name: str, generation: int) -> CloudEvent:
    attributes = {
        "type": EVENT_TYPE,
        "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "subject": f"objects/{name}",
        "id": uuid.uuid4().hex,
    }
    return CloudEvent(attributes, {"bucket": bucket, "name": name, "generation": str(generation)})


@dataclass
class Delivery:
    name: str
    generation: int
    attempt: int = 0


class EventBridge:
    def __init__(
        self,
        store: ObjectStore,
        function_url: str,
        state_file: Path,
        *,
        interval: float = 0.25,
        senders: int = 4,
        max_attempts: int = 8,
        on_delivered: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self._store = store
        self._url = function_url
        self._state_file = state_file
        self._interval = interval
        self._max_attempts = max_attempts
        self._on_delivered = on_delivered
        self._seen: dict[str, int] = self._load()
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, name="bridge-watch", daemon=True)]
        self._threads += [
            threading.Thread(target=self._send, name=f"bridge-send-{i}", daemon=True) for i in range(senders)
        ]
        self.delivered = 0
        self.in_flight = 0
        self._lock = threading.Lock()

    def _load(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads(self._state_file.read_text()).items()}
        except FileNotFoundError:
            return {}

    def _save(self) -> None:
        partial = self._state_file.with_suffix(".partial")
        partial.write_text(json.dumps(self._seen))
        partial.replace(self._state_file)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=5)
        self._save()

    def idle(self) -> bool:
        """Nothing queued or being delivered (the last poll found nothing new)."""
        with self._lock:
            return self._queue.empty() and self.in_flight == 0

    def poll_once(self) -> int:
        """List the bucket once and queue an event per new generation; return how many."""
        found = 0
        current = self._store.list_objects("")
        names = set()
        for info in current:
            names.add(info.name)
            if self._seen.get(info.name) != info.generation:
                self._seen[info.name] = info.generation
                self.enqueue(info.name, info.generation)
                found += 1
        for gone in set(self._seen) - names:
            del self._seen[gone]  # deleted objects fire no finalize event; forget them
        if found:
            self._save()
        return found

    def enqueue(self, name: str, generation: int) -> None:
        """Deliver the event of (name, generation), again if it was delivered before."""
        with self._lock:
            self.in_flight += 1
        self._queue.put(Delivery(name, generation))

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except StoreUnavailable as exc:
                log.warning(f"cannot list the bucket: {exc}")
            self._stop.wait(self._interval)

    def _send(self) -> None:
        session = requests.Session()
        while True:
            delivery = self._queue.get()
            if delivery is None:
                return
            try:
                settled = self._deliver(session, delivery)
            except Exception as exc:  # a sender that died would stop delivering without a word
                self._undeliverable(delivery, f"{type(exc).__name__}: {exc}")
                settled = True
            if settled:
                with self._lock:
                    self.in_flight -= 1

    def _deliver(self, session: requests.Session, delivery: Delivery) -> bool:
        """Post one event; False when it is scheduled again (a retry), True when it is settled."""
        status = self._post(session, delivery)
        if status is not None and status < 300:
            with self._lock:
                self.delivered += 1
            if self._on_delivered:
                self._on_delivered(delivery.name, delivery.generation, status)
            return True
        delivery.attempt += 1
        if delivery.attempt >= self._max_attempts or self._stop.is_set():
            self._undeliverable(delivery, f"no 2xx answer after {delivery.attempt} attempts (last {status})")
            return True
        threading.Timer(min(0.5 * 2**delivery.attempt, 30), self._queue.put, (delivery,)).start()
        return False

    def _undeliverable(self, delivery: Delivery, why: str) -> None:
        uri = f"gs://{self._store.bucket}/{delivery.name}"
        folder = f"gs://{self._store.bucket}/{delivery.name.rpartition('/')[0]}"
        log.error(
            f"gave up delivering the event of {uri}#{delivery.generation}: {why}; once the cause is "
            f"fixed, run `turnstile backfill {folder}` (or upload the object again)",
            extra={"event": "event_undeliverable", "object": uri, "generation": delivery.generation},
        )

    def _post(self, session: requests.Session, delivery: Delivery) -> int | None:
        headers, body = to_structured(cloud_event(self._store.bucket, delivery.name, delivery.generation))
        try:
            return int(session.post(self._url, headers=headers, data=body, timeout=600).status_code)
        except requests.RequestException:
            return None


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
