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
an exception while building or posting an event (not an answer of the host: retrying cannot help)
is logged (ERROR, naming the object) and the event dropped, and the sender takes the next one.

A listing sees every object but not every intermediate generation of an object rewritten faster
than the poll interval (the lock, `_BACKFILL`); the protocol never depends on those, because each
state object is read afresh by whoever the last event wakes. What was seen is saved in the stack's
home, so a restarted stack does not deliver its whole bucket again.
"""

from __future__ import annotations

import heapq
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

from turnstile.core import logs
from turnstile.core.errors import StoreUnavailable
from turnstile.store.port import ObjectStore

EVENT_TYPE = "google.cloud.storage.object.v1.finalized"
RETENTION_SECONDS = 24 * 3600.0  # how long Eventarc keeps retrying an event its target refuses
MAX_BACKOFF_SECONDS = 60.0  # cap of the wait between attempts, so a host that comes up is served soon
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
    first_seen: float
    """Wall-clock time (epoch seconds) the bridge first queued this event: its retention starts there."""
    attempt: int = 0

    @property
    def key(self) -> str:
        return f"{self.generation}#{self.name}"


class EventBridge:
    def __init__(
        self,
        store: ObjectStore,
        function_url: str,
        state_file: Path,
        *,
        interval: float = 0.25,
        senders: int = 4,
        retention: float = RETENTION_SECONDS,
        max_backoff: float = MAX_BACKOFF_SECONDS,
        on_delivered: Callable[[str, int, int], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._url = function_url
        self._state_file = state_file
        self._pending_file = state_file.with_name(f"{state_file.stem}.pending.json")
        self._interval = interval
        self._retention = retention
        self._max_backoff = max_backoff
        self._on_delivered = on_delivered
        self._clock = clock
        self._seen: dict[str, int] = self._load()
        self._pending: dict[str, Delivery] = self._load_pending()
        self._pending_saved = True
        self._retries: list[tuple[float, int, Delivery]] = []  # (due, tie-breaker, delivery), a heap
        self._retry_order = 0
        self._queue: queue.Queue[Delivery | None] = queue.Queue()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, name="bridge-watch", daemon=True)]
        self._threads += [
            threading.Thread(target=self._send, name=f"bridge-send-{i}", daemon=True) for i in range(senders)
        ]
        self.delivered = 0
        self.refused = 0  # attempts answered with no 2xx, or not at all
        self.in_flight = 0
        self._lock = threading.Lock()

    def _load(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads(self._state_file.read_text()).items()}
        except FileNotFoundError:
            return {}

    def _load_pending(self) -> dict[str, Delivery]:
        try:
            entries = json.loads(self._pending_file.read_text())
        except FileNotFoundError:
            return {}
        found = [Delivery(str(e["name"]), int(e["generation"]), float(e["first_seen"])) for e in entries]
        return {d.key: d for d in found}

    def _save(self) -> None:
        _replace(self._state_file, json.dumps(self._seen))
        self._save_pending()

    def _save_pending(self) -> None:
        with self._lock:
            if self._pending_saved:
                return
            entries = [
                {"name": d.name, "generation": d.generation, "first_seen": d.first_seen}
                for d in self._pending.values()
            ]
            self._pending_saved = True
        _replace(self._pending_file, json.dumps(entries))

    def start(self) -> None:
        """Deliver what a previous run left undelivered, then watch the bucket."""
        with self._lock:
            left = list(self._pending.values())
            self.in_flight += len(left)
        for delivery in left:
            self._queue.put(delivery)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop delivering; what is not delivered yet stays saved for the next start."""
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
        delivery = Delivery(name, generation, self._clock())
        with self._lock:
            self.in_flight += 1
            self._pending[delivery.key] = delivery
            self._pending_saved = False
        self._queue.put(delivery)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except StoreUnavailable as exc:
                log.warning(f"cannot list the bucket: {exc}")
            self._requeue_due()
            self._save_pending()
            self._stop.wait(self._interval)

    def _requeue_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = []
            while self._retries and self._retries[0][0] <= now:
                due.append(heapq.heappop(self._retries)[2])
        for delivery in due:
            self._queue.put(delivery)

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
                self._settle(delivery)

    def _settle(self, delivery: Delivery) -> None:
        with self._lock:
            self.in_flight -= 1
            if self._pending.get(delivery.key) is delivery:
                del self._pending[delivery.key]
                self._pending_saved = False

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
        with self._lock:
            self.refused += 1
        last = "no answer (the function host is down?)" if status is None else f"HTTP {status}"
        waited = self._clock() - delivery.first_seen
        if waited >= self._retention:
            self._undeliverable(
                delivery,
                f"no 2xx answer within the retention of {self._retention:.0f} s "
                f"({delivery.attempt} attempts, last: {last})",
            )
            return True
        if self._stop.is_set():
            return False  # saved as pending: the next start delivers it
        backoff = min(0.5 * 2 ** min(delivery.attempt, 30), self._max_backoff)
        with self._lock:
            self._retry_order += 1
            heapq.heappush(self._retries, (time.monotonic() + backoff, self._retry_order, delivery))
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


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a crash mid-write leaves the previous version)."""
    partial = path.with_suffix(".partial")
    partial.write_text(text)
    partial.replace(path)


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
