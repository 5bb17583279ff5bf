"""Whether a store's credentials may write, asked without writing (the console starts read-only
when they may not)."""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.cli.conftest import TABLE, World
from tests.conftest import AWS_TEST_ENVIRONMENT
from tests.ui.iam_server import REGION, IamMotoServer, User
from tests.ui.process import ConsoleProcess
from turnstile.config.settings import Settings
from turnstile.core.errors import StoreRefused
from turnstile.names.paths import Table
from turnstile.store.gcs import GcsStore
from turnstile.store.memory import MemoryStore
from turnstile.store.port import writable
from turnstile.store.s3 import S3Store
from turnstile.store.s3 import make_client as make_s3_client
from turnstile.store.split import SplitStore


def test_s3_says_its_credentials_may_write_and_writes_nothing(s3_store: S3Store) -> None:
    assert writable(s3_store) is True
    assert s3_store.list_objects("") == []


def test_an_emulator_without_iam_cannot_tell(gcs_store: GcsStore) -> None:
    assert writable(gcs_store) is None  # fake-gcs-server has no testIamPermissions
    assert gcs_store.list_objects("") == []


def test_a_split_store_answers_for_its_state_bucket(s3_store: S3Store) -> None:
    assert writable(SplitStore(MemoryStore("data-bucket", scheme="s3"), s3_store)) is True
    assert writable(MemoryStore("memory-bucket")) is None


# --- A real refusal: a moto server that enforces IAM (tests/ui/iam_server.py) -----------------------

READER_ACTIONS = ["s3:GetObject", "s3:ListBucket"]
WRITER_ACTIONS = [*READER_ACTIONS, "s3:PutObject"]
BUCKET = "turnstile-iam-bucket"


@dataclass
class Account:
    """A bucket in an IAM-enforcing moto server and its users: one that may read but not write, one
    that may also write, and an administrator for setting up table states and looking at what the
    others left."""

    server: IamMotoServer
    reader: User
    writer: User
    admin: User

    def store_of(self, user: User, monkeypatch: pytest.MonkeyPatch) -> S3Store:
        """An S3 store as the product builds it (`make_client`: the usual AWS chain), signed by `user`."""
        for name, value in self.environment(user).items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)  # an IAM user's keys carry none
        return S3Store(make_s3_client(REGION, self.server.url), BUCKET)

    def environment(self, user: User) -> dict[str, str]:
        """The user's keys (an IAM user's carry no session token), the region, the server."""
        usual = {k: v for k, v in AWS_TEST_ENVIRONMENT.items() if k != "AWS_SESSION_TOKEN"}
        return usual | user.environment | {"AWS_ENDPOINT_URL": self.server.url}

    def versions(self) -> list[str]:
        """Every version and delete marker in the bucket, as the administrator sees them."""
        listed = self.admin.client("s3", self.server.url).list_object_versions(Bucket=BUCKET)
        return [v["Key"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])]


@pytest.fixture
def account(tmp_path: Path) -> Iterator[Account]:
    server = IamMotoServer(tmp_path / "moto.log")
    try:
        server.create_bucket(BUCKET)
        reader = server.create_user("reader", actions=READER_ACTIONS, bucket=BUCKET)
        writer = server.create_user("writer", actions=WRITER_ACTIONS, bucket=BUCKET)
        admin = server.create_user("admin", actions=["s3:*"], bucket=BUCKET)
        server.enforce()
        yield Account(server, reader, writer, admin)
    finally:
        server.stop()


def test_s3_says_a_user_without_put_object_may_not_write_and_writes_nothing(
    account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = account.store_of(account.reader, monkeypatch)
    assert reader.list_objects("") == []  # the reader's credentials are good: it may list
    assert writable(reader) is False
    writer = account.store_of(account.writer, monkeypatch)
    assert writable(writer) is True
    assert account.versions() == []  # neither answer wrote (nor deleted) anything
    # The answers are the server's: the reader's writes are refused, the writer's accepted.
    with pytest.raises(StoreRefused, match=r"refused the credentials \(AccessDenied\)"):
        reader.write("_probe", b"x")
    assert writer.write("_probe", b"x") > 0


def test_the_console_starts_read_only_for_a_user_who_may_not_write_and_refuses_actions(
    account: Account, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = account.store_of(account.admin, monkeypatch)
    world = World(admin, Table(BUCKET, TABLE, "sales", "orders"))
    world.queue("incremental/2024/05/01/13")
    world.fail("incremental/2024/05/01/13")
    lock = world.lock_generation()
    versions = account.versions()
    for variable in Settings.variables():  # nothing but the reader's AWS settings reaches the command
        if not variable.startswith("AWS_"):
            monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    environment = account.environment(account.reader) | {"TURNSTILE_HOME": str(tmp_path / "no-stack")}
    console = ConsoleProcess([f"s3://{BUCKET}"], environment, tmp_path / "ui.log")
    reason = f"the credentials in use may not write to s3://{BUCKET}"
    try:
        with requests.Session() as browser:
            page = browser.get(console.url, timeout=30)
            assert page.status_code == 200, page.text
            assert f"Read-only: {reason}." in html.unescape(page.text)
            table = browser.get(f"{console.base}/table/sales/orders", timeout=30)
            assert table.status_code == 200, table.text
            assert "/confirm/" not in table.text  # no action offered
            form = {"token": console.token, "table": TABLE, "expect_generation": str(lock)}
            refused = browser.post(f"{console.base}/act/unlock", data=form, timeout=30)
            assert refused.status_code == 403, refused.text
            assert f"the console is read-only ({reason})" in html.unescape(refused.text)
    finally:
        code = console.stop()
    assert code == 0, console.output()
    assert world.lock_generation() == lock
    assert account.versions() == versions  # nothing written: no check object, no unlock
