"""The console's application over fake-gcs-server (the real google-cloud-storage client), driven
through Starlette's TestClient, with table states built by the CLI tests' `World` (the protocol's
own writers)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

# The CLI tests' fixtures: each test starts on gs://, `turnstile ARGS...` in-process, a local-stack file.
from tests.cli.conftest import TABLE, World, _gs_scheme, run, stack  # noqa: F401
from turnstile.cli._errors import describe
from turnstile.config.settings import Settings
from turnstile.names.paths import Table
from turnstile.store.gcs import GcsStore
from turnstile.ui.app import create_app
from turnstile.ui.context import Console

TOKEN = "test-token-0123456789"
BASE = "http://127.0.0.1:8765"
COOKIE = "turnstile_console_8765"


def console_of(store: GcsStore, *, read_only: bool = False) -> Console:
    return Console(
        store=store,
        settings=Settings.from_env({}),
        token=TOKEN,
        storage="the emulator",
        read_only=read_only,
        read_only_reason="started with --read-only" if read_only else None,
        describe=lambda exc: None if (said := describe(exc)) is None else said[1],
        # Pages wait for the reading under way, as the tests look at what it shows;
        # test_console_reading looks at the pages served before it ends.
        patience_seconds=60.0,
    )


def client_of(console: Console, *, signed_in: bool = True) -> TestClient:
    client = TestClient(create_app(console), base_url=BASE, follow_redirects=False)
    if signed_in:
        client.cookies.set(COOKIE, TOKEN)
    return client


@pytest.fixture
def world(gcs_store: GcsStore) -> World:
    return World(gcs_store, Table(gcs_store.bucket, TABLE, "sales", "orders"))


@pytest.fixture
def client(world: World) -> TestClient:
    return client_of(console_of(world.store))  # type: ignore[arg-type]
