"""What is S3's own beyond the shared contract: the generation mapping, unique bytes for every state
write, the lock's races through the protocol's own lock writer, and the errors an operator meets.
All against a real moto server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import botocore.loaders
import botocore.session
import pytest
from botocore.config import Config
from moto.core.authorization import enable_iam_authentication

from tests.aws.upstream import misordered_pair, same_second, upstream_put, within_one_second
from tests.conftest import AWS_REGION, create_s3_bucket
from tests.contract.test_object_store import race
from turnstile.config.settings import Settings
from turnstile.core.errors import PreconditionFailed, SettingsError, StoreRefused, StoreUnavailable
from turnstile.names.paths import Table
from turnstile.ops import session
from turnstile.protocol import lock as table_lock
from turnstile.protocol import operator, publisher
from turnstile.protocol.context import Invocation
from turnstile.state.records import Lock, LockState
from turnstile.store.s3 import TESTED_BOTOCORE, S3Store, make_client
from turnstile.store.s3_generations import GENERATION_KEY, unversioned_generation, version_generation
from turnstile_dev.bench.s3_requests import RequestCounter

TABLE = Table("unused", "sales/orders", "sales", "orders")


def raw(moto_server: str) -> Any:
    return make_client(AWS_REGION, moto_server)


def invocation(store: S3Store) -> Invocation:
    return session.invocation(store, Settings.from_env({}))


# -- the generation mapping ---------------------------------------------------------------------------


def test_turnstile_writes_keep_their_generation_in_metadata(s3_store: S3Store, moto_server: str) -> None:
    generation = s3_store.write("t/a", b"x")
    head = raw(moto_server).head_object(Bucket=s3_store.bucket, Key="t/a")
    assert head["Metadata"] == {GENERATION_KEY: str(generation)}


def test_an_upstream_object_gets_a_derived_generation_that_every_call_agrees_on(
    s3_store: S3Store, moto_server: str
) -> None:
    raw(moto_server).put_object(Bucket=s3_store.bucket, Key="sales/orders/b1/_SUCCESS", Body=b"")
    head = raw(moto_server).head_object(Bucket=s3_store.bucket, Key="sales/orders/b1/_SUCCESS")
    expected = version_generation(head["LastModified"], 0)  # its first version
    found = s3_store.read("sales/orders/b1/_SUCCESS")
    info = s3_store.stat("sales/orders/b1/_SUCCESS")
    [listed] = s3_store.list_objects("sales/orders/b1/")
    assert found is not None and info is not None
    assert found.generation == info.generation == listed.generation == expected
    # The protocol replaces and deletes by that generation like any other.
    replaced = s3_store.replace("sales/orders/b1/_SUCCESS", b"again", if_generation=expected)
    assert replaced > expected
    s3_store.delete("sales/orders/b1/_SUCCESS", if_generation=replaced)
    assert s3_store.read("sales/orders/b1/_SUCCESS") is None


def test_listings_report_the_generations_reads_report(s3_store: S3Store) -> None:
    written = {
        f"ds/t/_backlog/{i}/_SUCCESS": s3_store.write(f"ds/t/_backlog/{i}/_SUCCESS", b"p%d" % i)
        for i in range(5)
    }
    listed = {info.name: info.generation for info in s3_store.list_objects("ds/t/_backlog/")}
    assert listed == written


def test_a_rewrite_of_the_same_bytes_is_a_new_generation_and_the_old_one_cannot_delete_it(
    s3_store: S3Store,
) -> None:
    first = s3_store.write("t/a", b"same")
    second = s3_store.write("t/a", b"same")
    assert second > first
    with pytest.raises(PreconditionFailed) as caught:
        s3_store.delete("t/a", if_generation=first)
    assert caught.value.found is not None and caught.value.found.generation == second
    assert (
        str(caught.value)
        == f"precondition failed on t/a: expected generation {first}, found generation {second}"
    )
    assert s3_store.read("t/a") is not None


# -- upstream's uploads in a versioned bucket ----------------------------------------------------------


def test_an_identical_upload_within_one_second_is_a_new_larger_generation(
    s3_store: S3Store, moto_server: str
) -> None:
    # An empty `_SUCCESS` uploaded twice: same ETag, same LastModified second; only its versions differ.
    client = raw(moto_server)

    def attempt(i: int) -> tuple[str, int, int]:
        key = f"sales/orders/b{i}/_SUCCESS"
        upstream_put(client, s3_store.bucket, key)
        first = s3_store.stat(key)
        upstream_put(client, s3_store.bucket, key)
        second = s3_store.stat(key)
        assert first is not None and second is not None
        return key, first.generation, second.generation

    key, first, second = within_one_second(attempt, lambda r: same_second(client, s3_store.bucket, r[0], 2))
    assert second > first
    found = s3_store.read(key)
    [listed] = s3_store.list_objects(key)
    assert found is not None and found.generation == listed.generation == second
    assert s3_store.stat(key) == listed  # stable: every call agrees


def test_two_different_uploads_within_one_second_order_as_they_were_uploaded(
    s3_store: S3Store, moto_server: str
) -> None:
    client = raw(moto_server)
    earlier, later = misordered_pair()

    def attempt(i: int) -> tuple[str, int, int]:
        key = f"sales/orders/b{i}/_SUCCESS"
        upstream_put(client, s3_store.bucket, key, earlier)
        first = s3_store.stat(key)
        upstream_put(client, s3_store.bucket, key, later)
        second = s3_store.stat(key)
        assert first is not None and second is not None
        return key, first.generation, second.generation

    key, first, second = within_one_second(attempt, lambda r: same_second(client, s3_store.bucket, r[0], 2))
    assert second > first
    found = s3_store.read(key)
    assert found is not None and (found.data, found.generation) == (later, second)


def test_turning_versioning_on_keeps_the_generation_of_what_was_stored_before(moto_server: str) -> None:
    # A batch applied before the switch must not read as uploaded again after it (reconciliation
    # would block its table, or apply an unordered batch twice).
    bucket = create_s3_bucket(moto_server, versioned=False)
    client, store = raw(moto_server), S3Store(raw(moto_server), bucket)
    upstream_put(client, bucket, "sales/orders/b1/_SUCCESS")  # its version id is "null"
    unversioned = store.stat("sales/orders/b1/_SUCCESS")
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    before = S3Store(raw(moto_server), bucket).stat("sales/orders/b1/_SUCCESS")
    assert unversioned is not None and before == unversioned
    [listed] = store.list_objects("sales/orders/b1/_SUCCESS")
    assert listed.generation == before.generation
    upstream_put(client, bucket, "sales/orders/b1/_SUCCESS")
    after = store.stat("sales/orders/b1/_SUCCESS")
    assert after is not None and after.generation > before.generation


def test_a_bucket_without_versioning_is_reported_with_what_it_loses_and_the_fix(
    moto_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = create_s3_bucket(moto_server, versioned=False)
    client, store = raw(moto_server), S3Store(raw(moto_server), bucket)
    upstream_put(client, bucket, "sales/orders/b1/_SUCCESS")
    upstream_put(client, bucket, "sales/orders/b2/_SUCCESS")
    with caplog.at_level("ERROR", logger="turnstile"):
        first = store.stat("sales/orders/b1/_SUCCESS")
        store.stat("sales/orders/b2/_SUCCESS")
        store.write("t/a", b"turnstile's own objects carry their generation: no versions needed")
        store.stat("t/a")
    [reported] = [r for r in caplog.records if getattr(r, "event", None) == "s3_bucket_unversioned"]  # once
    assert reported.levelname == "ERROR"
    message = reported.getMessage()
    assert f"s3://{bucket} does not keep versions" in message
    assert "uploads again with the same bytes within one second" in message
    assert f"put-bucket-versioning --bucket {bucket}" in message
    head = client.head_object(Bucket=bucket, Key="sales/orders/b1/_SUCCESS")
    assert first is not None and first.generation == unversioned_generation(
        head["LastModified"], head["ETag"]
    )


def test_a_state_bucket_without_versioning_is_not_reported(
    moto_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = S3Store(raw(moto_server), create_s3_bucket(moto_server, versioned=False))
    with caplog.at_level("ERROR", logger="turnstile"):
        generation = store.create("sales/orders/_bqlock", b"{}")
        assert store.stat("sales/orders/_bqlock").generation == generation  # type: ignore[union-attr]
        store.list_objects("sales/orders/")
    assert caplog.records == []


# -- listings --------------------------------------------------------------------------------------------


def test_a_listing_without_generations_makes_no_request_per_object(moto_server: str, s3_bucket: str) -> None:
    counter = RequestCounter()
    store = S3Store(counter.attach(raw(moto_server)), s3_bucket)
    for i in range(5):
        upstream_put(raw(moto_server), s3_bucket, f"sales/orders/b1/part-{i}.csv", b"id\n%d\n" % i)
    upstream_put(raw(moto_server), s3_bucket, "sales/orders/b1/_SUCCESS")
    listed = store.list_entries("sales/orders/b1/")
    assert [(e.name, e.size, e.generation) for e in listed] == [
        ("sales/orders/b1/_SUCCESS", 0, None),
        *((f"sales/orders/b1/part-{i}.csv", 5, None) for i in range(5)),
    ]
    assert counter.snapshot() == {"ListObjectsV2": 1}
    before = counter.snapshot()
    [success] = store.list_objects("sales/orders/b1/", only=lambda name: name.endswith("/_SUCCESS"))
    assert counter.since(before) == {"ListObjectsV2": 1, "HeadObject": 1, "ListObjectVersions": 1}
    assert success == store.stat("sales/orders/b1/_SUCCESS")


# -- unique bytes for every state write -----------------------------------------------------------------


def test_two_writes_of_the_same_lock_carry_different_bytes(s3_store: S3Store) -> None:
    inv = invocation(s3_store)
    lock = Lock(state=LockState.RUNNING, job_id="job-1")
    first = table_lock.write(inv, TABLE, lock, 0)
    first_bytes = s3_store.read(TABLE.lock).data  # type: ignore[union-attr]
    table_lock.write(inv, TABLE, lock, first)
    second_bytes = s3_store.read(TABLE.lock).data  # type: ignore[union-attr]
    assert first_bytes != second_bytes
    assert Lock.decode(first_bytes, "lock").nonce != Lock.decode(second_bytes, "lock").nonce


def test_every_backfill_write_is_unique_so_an_exiting_subscriber_never_deletes_a_newer_one(
    s3_store: S3Store,
) -> None:
    inv = invocation(s3_store)
    publisher.ensure_subscriber(inv, TABLE)  # a run is scheduled
    seen = s3_store.stat(TABLE.backfill)
    operator.resume(inv, TABLE)  # an operator restarts it within the same second
    with pytest.raises(PreconditionFailed):
        s3_store.delete(TABLE.backfill, if_generation=seen.generation)  # type: ignore[union-attr]
    assert s3_store.stat(TABLE.backfill) is not None


# -- the lock's races -------------------------------------------------------------------------------


def test_twenty_invocations_racing_to_take_a_free_lock_have_one_winner(s3_store: S3Store) -> None:
    inv = invocation(s3_store)
    wins, losses = race(
        20, lambda i: table_lock.write(inv, TABLE, Lock(state=LockState.RUNNING, job_id=f"job-{i}"), 0)
    )
    assert (len(wins), len(losses)) == (1, 19)
    lock, generation = table_lock.read(inv, TABLE)
    assert generation == wins[0]
    assert all(isinstance(loss, PreconditionFailed) and loss.found is not None for loss in losses)
    assert {loss.found.generation for loss in losses} == {generation}  # type: ignore[attr-defined]
    assert lock.state is LockState.RUNNING


def test_twenty_invocations_releasing_the_same_lock_generation_have_one_winner(s3_store: S3Store) -> None:
    # Every contender writes the same state: only the lock's nonce tells their writes apart.
    inv = invocation(s3_store)
    held = table_lock.write(inv, TABLE, Lock(state=LockState.RUNNING, job_id="job-1"), 0)
    wins, losses = race(20, lambda i: table_lock.write(inv, TABLE, Lock(), held))
    assert (len(wins), len(losses)) == (1, 19)
    assert table_lock.read(inv, TABLE)[1] == wins[0]


def test_lock_handoffs_under_contention_lose_no_transition(s3_store: S3Store) -> None:
    inv = invocation(s3_store)
    table_lock.write(inv, TABLE, Lock(history=()), 0)

    def take_turns(i: int) -> None:
        turns = 0
        while turns < 3:
            lock, generation = table_lock.read(inv, TABLE)
            try:
                table_lock.write(
                    inv, TABLE, lock.model_copy(update={"history": (*lock.history, f"{i}")}), generation
                )
            except PreconditionFailed:
                continue
            turns += 1

    wins, losses = race(6, take_turns)
    assert (len(wins), losses) == (6, [])
    assert len(table_lock.read(inv, TABLE)[0].history) == 18


# -- errors an operator meets ---------------------------------------------------------------------------


def test_a_missing_bucket_says_so(moto_server: str) -> None:
    store = S3Store(make_client(AWS_REGION, moto_server), "no-such-bucket")
    with pytest.raises(StoreRefused, match=r"s3://no-such-bucket does not exist.*check the bucket name"):
        store.list_objects("")
    with pytest.raises(StoreRefused, match="does not exist"):
        store.read("x")


def client_without_conditional_requests(moto_server: str, models: Path) -> Any:
    """A real S3 client whose API model predates S3's conditional requests, as an older botocore's
    does (Lambda runtimes bundle one): botocore refuses IfMatch / IfNoneMatch before sending."""
    loader = botocore.loaders.Loader()
    version = loader.determine_latest_version("s3", "service-2")
    model = loader.load_service_model("s3", "service-2", version)
    for shape in ("PutObjectRequest", "DeleteObjectRequest"):
        for member in ("IfMatch", "IfNoneMatch"):
            model["shapes"][shape]["members"].pop(member, None)
    (models / "s3" / version).mkdir(parents=True)
    (models / "s3" / version / "service-2.json").write_text(json.dumps(model))
    old = botocore.session.Session()
    old.set_config_variable("data_path", str(models))
    return boto3.session.Session(botocore_session=old).client(
        "s3", region_name=AWS_REGION, endpoint_url=moto_server, config=Config(s3={"addressing_style": "path"})
    )


def test_a_botocore_without_conditional_requests_is_refused_with_the_version_needed(
    s3_store: S3Store, moto_server: str, tmp_path: Path
) -> None:
    generation = s3_store.write("t/lock", b"v1")
    store = S3Store(client_without_conditional_requests(moto_server, tmp_path), s3_store.bucket)
    needed = rf"too old for S3's conditional requests.*botocore {TESTED_BOTOCORE}.*requirements-aws"
    with pytest.raises(StoreRefused, match=needed):
        store.create("t/new", b"x")
    with pytest.raises(StoreRefused, match=needed):
        store.replace("t/lock", b"v2", if_generation=generation)
    with pytest.raises(StoreRefused, match=needed):
        store.delete("t/lock", if_generation=generation)
    assert s3_store.read("t/new") is None
    assert store.read("t/lock") is not None  # unconditional calls still work


def test_a_missing_region_says_which_variable_to_set() -> None:
    with pytest.raises(SettingsError, match="AWS_REGION is not set"):
        make_client(None)


def test_wrong_credentials_are_refused_with_what_to_check(
    s3_store: S3Store, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG1")
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    store = S3Store(make_client(AWS_REGION, moto_server), s3_store.bucket)
    with (
        enable_iam_authentication(),
        pytest.raises(StoreRefused, match=r"refused the credentials.*AWS_ACCESS_KEY_ID"),
    ):
        store.read("t/a")


def test_no_credentials_at_all_are_refused_with_where_they_come_from(
    s3_store: S3Store, moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = S3Store(make_client(AWS_REGION, moto_server), s3_store.bucket)
    with pytest.raises(StoreRefused, match="no AWS credentials found"):
        store.write("t/a", b"x")


def test_an_unreachable_endpoint_is_transient(s3_bucket: str) -> None:
    store = S3Store(make_client(AWS_REGION, "http://127.0.0.1:9", max_attempts=2), s3_bucket)
    with pytest.raises(StoreUnavailable, match=rf"s3://{s3_bucket}/t/a: storage did not answer"):
        store.read("t/a")


class _Throttling(BaseHTTPRequestHandler):
    """S3 answering every request with 503 SlowDown, as it does under a request-rate limit."""

    methods: list[str] = []
    BODY = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"

    def _answer(self) -> None:
        type(self).methods.append(self.command)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(self.BODY)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(self.BODY)

    def do_GET(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.usefixtures("moto_server")  # the session's dummy credentials
def test_throttling_that_outlasts_botocores_retries_is_transient() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Throttling)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        store = S3Store(
            make_client(AWS_REGION, f"http://127.0.0.1:{server.server_address[1]}", max_attempts=3), "lake"
        )
        with pytest.raises(StoreUnavailable, match=r"s3://lake/t/lock: storage did not answer.*SlowDown"):
            store.create("t/lock", b"x")
        assert _Throttling.methods == ["PUT"] * 3  # botocore retried before giving up
    finally:
        server.shutdown()
        server.server_close()
