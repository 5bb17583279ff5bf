"""A bucket, a function host and an event bus, wired the way Eventarc wires them.

Every finalized write (upstream's and the functions' own) becomes a real CloudEvent posted to
functions/main.py through functions-framework's test client, asynchronously: events queue and are
delivered by `drain`, optionally shuffled and duplicated. A 500 answer is redelivered, as Eventarc
does with retries on.
"""

from __future__ import annotations

import io
import json
import random
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cloudevents.conversion import to_binary
from cloudevents.http import CloudEvent
from functions_framework import create_app

from turnstile.config.config_cache import ConfigCache
from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.entrypoints import entry, wiring
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.jobs.port import JobRunner
from turnstile.names.paths import Table
from turnstile.state.records import Lock
from turnstile.store.port import ObjectStore
from turnstile.store.recording import RecordingStore
from turnstile.store.split import SplitStore

ROOT = Path(__file__).resolve().parents[2]
EVENT_TYPE = "google.cloud.storage.object.v1.finalized"


def cloud_event(bucket: str, name: str, generation: int) -> CloudEvent:
    attributes = {
        "type": EVENT_TYPE,
        "source": f"//storage.googleapis.com/projects/_/buckets/{bucket}",
        "subject": f"objects/{name}",
        "id": uuid.uuid4().hex,
    }
    data = {"bucket": bucket, "name": name, "generation": str(generation), "kind": "storage#object"}
    return CloudEvent(attributes, data)


@dataclass
class Host:
    store: RecordingStore
    runner: JobRunner
    tables: MemoryTables
    client: Any
    log: io.StringIO
    events: deque[tuple[str, int]] = field(default_factory=deque)
    delivered: list[tuple[str, int, int]] = field(default_factory=list)  # name, generation, status
    state: ObjectStore | None = None  # STATE_BUCKET's store: its writes are no events

    @property
    def functions_store(self) -> ObjectStore:
        """The store the functions are wired to: writes to the data bucket are events."""
        return self.store if self.state is None else SplitStore(self.store, self.state)

    @property
    def view(self) -> ObjectStore:
        """Both buckets as the functions see them (the data bucket alone without a state bucket)."""
        return self.store.inner if self.state is None else SplitStore(self.store.inner, self.state)

    @property
    def bucket(self) -> str:
        return self.store.bucket

    def upload(self, name: str, data: bytes = b"") -> int:
        return self.store.write(name, data)

    def put_batch(self, folder: str, rows: int = 1) -> int:
        """Upstream: data files, then `_SUCCESS` last. Returns the `_SUCCESS` generation."""
        self.upload(f"{folder}/part-0.csv", b"id\n" + b"".join(b"%d\n" % i for i in range(rows)))
        return self.upload(f"{folder}/_SUCCESS")

    def deliver(self, name: str, generation: int) -> int:
        headers, body = to_binary(cloud_event(self.bucket, name, generation))
        status = int(self.client.post("/", headers=headers, data=body).status_code)
        self.delivered.append((name, generation, status))
        return status

    def drain(
        self, *, rng: random.Random | None = None, duplicates: float = 0.0, max_events: int = 5000
    ) -> int:
        """Deliver queued events (and those they cause) until none is left; return how many."""
        count = 0
        while self.events:
            if count >= max_events:
                raise AssertionError(f"more than {max_events} events: the system does not settle")
            if rng is not None:
                self.events.rotate(-rng.randrange(len(self.events)))
            name, generation = self.events.popleft()
            if rng is not None and rng.random() < duplicates:
                self.events.append((name, generation))  # delivered again later
            if self.deliver(name, generation) >= 500:
                self.events.append((name, generation))  # Eventarc retries
            count += 1
        return count

    def lock(self, table: str) -> Lock:
        found = self.view.read(f"{table}/_bqlock")
        return Lock() if found is None else Lock.decode(found.data, table)

    def applied(self, table: str) -> list[str]:
        return self.tables.applied_rels(table)

    def backlog(self, table: str) -> list[str]:
        t = Table(self.bucket, table, *table.split("/"))
        return [t.rel_of_pointer(o.name) for o in self.view.list_objects(t.backlog)]

    def log_records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.getvalue().splitlines() if line.strip()]


def start_host(
    monkeypatch: pytest.MonkeyPatch,
    store: ObjectStore,
    env: dict[str, str] | None = None,
    *,
    synchronous: bool = True,
    tables: MemoryTables | None = None,
    runner_from_settings: bool = False,
    state: ObjectStore | None = None,
) -> Host:
    """Wire functions/main.py to `store` and an in-process runner; settings come from `env`. With
    `state`, turnstile's own objects go there (STATE_BUCKET) and only `store`'s writes are events.

    With `runner_from_settings` the runner is left to `turnstile.entrypoints.wiring`, as deployed (JOB_RUNNER
    and its variables in `env` choose it): the host's `runner` is then one built the same way."""
    for variable in Settings.variables():
        monkeypatch.delenv(variable, raising=False)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    events: deque[tuple[str, int]] = deque()
    recording = RecordingStore(store, lambda name, generation: events.append((name, generation)))
    tables = tables or MemoryTables()
    functions_store: ObjectStore = recording if state is None else SplitStore(recording, state)
    monkeypatch.setattr(wiring, "object_store", lambda settings, bucket: functions_store)
    monkeypatch.setattr(entry, "CONFIG_CACHE", ConfigCache())  # a new function instance per host
    runner: JobRunner
    if runner_from_settings:
        runner = wiring.job_runner(Settings.from_env(), functions_store)
    else:
        inline = InlineRunner(functions_store, tables, synchronous=synchronous)
        monkeypatch.setattr(wiring, "job_runner", lambda settings, store: inline)
        runner = inline
    log = io.StringIO()
    logs.configure("INFO", log)
    app = create_app(
        target="on_object_finalized", source=str(ROOT / "functions" / "main.py"), signature_type="cloudevent"
    )
    return Host(recording, runner, tables, app.test_client(), log, events, state=state)
