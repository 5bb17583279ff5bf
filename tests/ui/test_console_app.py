"""The console's pages and actions through its application, over fake-gcs-server: what each page
shows, that actions go through the CLI's checks and words, and who may use it (token, loopback
Host, POST with the token, same origin), with names and error texts escaped."""

from __future__ import annotations

import html
import re

from starlette.testclient import TestClient

from tests.cli.conftest import World
from tests.ui.conftest import BASE, COOKIE, TOKEN, client_of, console_of
from turnstile.config.settings import Settings
from turnstile.names.paths import Table
from turnstile.ops import status as status_ops
from turnstile.ops.session import invocation
from turnstile.state.records import AUDIT_FAILURE, BatchOutcome, BatchResult, Lock, LockState
from turnstile.store.s3 import S3Store

HEAD = "incremental/2024/05/01/13"
NEXT = "incremental/2024/05/01/14"
HOSTILE = "<script>"  # a batch folder may be named anything a path segment holds
HOSTILE_ERROR = "</pre><script>alert(1)</script><img src=x onerror=alert(2)>"


def lock_of(world: World) -> Lock:
    found = world.store.read(world.table.lock)
    assert found is not None
    return Lock.decode(found.data, found.name)


def blocked(world: World, error: str = "column 'amount' not found") -> World:
    world.queue(HEAD)
    world.queue(NEXT)
    world.fail(HEAD, error=error, position="incremental/2024/05/01/12")
    return world


def text_of(page: str) -> str:
    """The page's text as a reader sees it: tags out, entities decoded, spaces folded."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


# -- who may use it ------------------------------------------------------------------------------


def test_a_page_without_the_token_is_refused(world: World) -> None:
    anonymous = client_of(console_of(world.store), signed_in=False)  # type: ignore[arg-type]
    refused = anonymous.get("/")
    assert refused.status_code == 403
    assert "needs the token" in refused.text
    assert anonymous.get("/?token=wrong").status_code == 403
    assert anonymous.get("/table/sales/orders").status_code == 403


def test_the_token_in_the_url_becomes_a_strict_cookie_and_leaves_the_address_bar(world: World) -> None:
    anonymous = client_of(console_of(world.store), signed_in=False)  # type: ignore[arg-type]
    moved = anonymous.get(f"/?token={TOKEN}&sort=lag")
    assert moved.status_code == 303
    assert moved.headers["location"] == "/?sort=lag"
    cookie = moved.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert anonymous.get("/").status_code == 200  # the cookie now


def test_a_host_other_than_the_loopback_address_is_refused(client: TestClient) -> None:
    """DNS rebinding: a name that resolves to 127.0.0.1 still says its own name in Host."""
    refused = client.get("/", headers={"host": "evil.example:8765"})
    assert refused.status_code == 403
    assert "127.0.0.1 only" in refused.text


def test_a_post_without_the_token_is_refused_and_changes_nothing(world: World, client: TestClient) -> None:
    blocked(world)
    generation = world.lock_generation()
    form = {"table": world.table.prefix, "expect_generation": str(generation)}
    refused = client.post("/act/unlock", data=form)  # the cookie alone is what a forged form would carry
    assert refused.status_code == 403
    wrong = client.post("/act/unlock", data=form | {"token": "guess"})
    assert wrong.status_code == 403
    anonymous = client_of(console_of(world.store), signed_in=False)  # type: ignore[arg-type]
    assert anonymous.post("/act/unlock", data=form | {"token": "guess"}).status_code == 403
    assert world.lock_generation() == generation
    assert lock_of(world).state is LockState.FAILED


def test_a_post_from_another_origin_is_refused_even_with_the_token(world: World, client: TestClient) -> None:
    blocked(world)
    generation = world.lock_generation()
    form = {"token": TOKEN, "table": world.table.prefix, "expect_generation": str(generation)}
    for origin in ("https://evil.example", "http://127.0.0.1:9999", "null"):
        refused = client.post("/act/unlock", data=form, headers={"origin": origin})
        assert refused.status_code == 403, origin
    assert world.lock_generation() == generation


def test_every_page_forbids_other_sources_and_framing(world: World, client: TestClient) -> None:
    blocked(world)
    for path in ("/", "/table/sales/orders", "/lineage", "/static/console.css"):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert response.headers["x-frame-options"] == "DENY"
        # Not no-referrer: with it a browser says Origin: null on its own same-origin POSTs.
        assert response.headers["referrer-policy"] == "same-origin"
        # Nothing is fetched from anywhere else: every src and href stays on the console.
        for link in re.findall(r'(?:src|href)="([^"]*)"', response.text):
            assert link.startswith(("/", "#", "data:")), (path, link)


# -- pages ---------------------------------------------------------------------------------------


def test_the_tables_page_lists_a_blocked_table_with_its_health_in_words(
    world: World, client: TestClient
) -> None:
    blocked(world)
    world.store.write("web/clicks/2024/05/01/part-0.csv", b"id\n1\n")
    page = client.get("/")
    assert page.status_code == 200
    row = re.search(r'<tr data-table="sales.orders">(.*?)</tr>', page.text, re.S)
    assert row is not None
    assert '<span class="badge bad">BLOCKED</span>' in row.group(1)  # colour and word
    assert HEAD in row.group(1)
    assert "1 BLOCKED" in text_of(page.text)
    assert 'data-table="web.clicks"' in page.text
    only = client.get("/?health=BLOCKED")
    assert 'data-table="sales.orders"' in only.text and 'data-table="web.clicks"' not in only.text
    named = client.get("/?q=click")
    assert 'data-table="web.clicks"' in named.text and 'data-table="sales.orders"' not in named.text
    by_backlog = client.get("/fragment/tables?sort=backlog&desc=1")
    assert by_backlog.status_code == 200 and "<html" not in by_backlog.text  # rows alone: the refresh
    assert by_backlog.text.index("sales.orders") < by_backlog.text.index("web.clicks")


def test_the_table_page_shows_the_failure_and_the_commands_status_prints(
    world: World, client: TestClient
) -> None:
    blocked(world)
    expected = status_ops.table_status(invocation(world.store, Settings.from_env({})), world.table)
    assert expected.lock is not None and expected.lock.unlock_command is not None
    page = client.get("/table/sales/orders")
    assert page.status_code == 200
    text = text_of(page.text)
    assert f"Blocked at batch {HEAD}" in text
    assert "column 'amount' not found" in text
    assert f'<code id="cmd-unlock">{html.escape(expected.lock.unlock_command)}</code>' in page.text
    assert f"{expected.lock.unlock_command} --skip-head" in text
    assert f'data-rel="{NEXT}" data-state="QUEUED"' in page.text  # the timeline
    assert f'data-rel="{HEAD}" data-state="BLOCKED"' in page.text


def test_a_table_blocked_by_a_failed_audit_shows_the_publish_command_status_prints(
    world: World, client: TestClient
) -> None:
    blocked(world, error="the audit 'no_negative' (load.json audits[0]) found 2 offending row(s)")
    generation = lock_of(world).covers[0].success_generation
    failed = BatchResult(
        job_id="turnstile-sales-orders-0123456789abcdef",
        rel=HEAD,
        success_generation=generation,
        outcome=BatchOutcome.FAILED,
        error="the audit 'no_negative' (load.json audits[0]) found 2 offending row(s)",
        error_kind=AUDIT_FAILURE,
    )
    world.store.write(world.table.result(HEAD, generation), failed.encode())
    expected = status_ops.table_status(invocation(world.store, Settings.from_env({})), world.table)
    assert expected.lock is not None and expected.lock.publish_command is not None
    page = client.get("/table/sales/orders")
    assert f'<code id="cmd-publish">{html.escape(expected.lock.publish_command)}</code>' in page.text
    assert "or, to publish the staged batch to main as it is" in text_of(page.text)


def test_a_table_blocked_for_another_reason_shows_no_publish_command(
    world: World, client: TestClient
) -> None:
    blocked(world)
    assert 'id="cmd-publish"' not in client.get("/table/sales/orders").text


def test_the_history_is_paged_newest_first(world: World, client: TestClient) -> None:
    for hour in range(60):
        world.result(f"incremental/2024/05/{1 + hour // 24:02d}/{hour % 24:02d}", 100 + hour)
    first = client.get("/table/sales/orders")
    rels = re.findall(r'<tr data-rel="([^"]+)">', first.text.split('id="history"')[1])
    assert len(rels) == 50 and rels[0] == "incremental/2024/05/03/11"
    assert "page 1 of 2" in text_of(first.text)
    second = client.get("/table/sales/orders?page=2")
    rels = re.findall(r'<tr data-rel="([^"]+)">', second.text.split('id="history"')[1])
    assert rels == [f"incremental/2024/05/01/{h:02d}" for h in range(9, -1, -1)]


def test_the_config_shown_is_the_cascade_resolved_for_the_table(world: World, client: TestClient) -> None:
    world.store.write("_config/load.json", b'{"format": "csv", "max_batches_per_job": 3}')
    world.store.write("sales/orders/_config/load.json", b'{"max_batches_per_job": 7}')
    world.queue(HEAD)
    page = client.get("/table/sales/orders")
    resolved = re.search(r'<pre id="resolved-config">(.*?)</pre>', page.text, re.S)
    assert resolved is not None
    assert '"max_batches_per_job": 7' in html.unescape(resolved.group(1))  # the nearer file wins
    sources = page.text.index(f"gs://{world.store.bucket}/_config/load.json")
    assert sources < page.text.index(f"gs://{world.store.bucket}/sales/orders/_config/load.json")


def test_a_hostile_folder_name_and_error_text_are_shown_as_text(world: World, client: TestClient) -> None:
    rel = f"incremental/{HOSTILE}"
    world.queue(rel)
    world.fail(rel, error=f"cannot read {HOSTILE_ERROR}")
    world.result(f"incremental/{HOSTILE}older", 7)
    for path in ("/", "/table/sales/orders", f"/confirm/skip?table=sales/orders&rel=incremental/{HOSTILE}"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<script>" not in page.text and "<img src=x" not in page.text, path
        assert "&lt;script&gt;" in page.text, path
    table = client.get("/table/sales/orders").text
    assert f"cannot read {HOSTILE_ERROR}" in text_of(table)  # shown as the text it is
    assert f"incremental/{HOSTILE}older" in text_of(table)


# -- actions -------------------------------------------------------------------------------------


def test_confirming_unlock_releases_the_lock_it_showed_as_the_cli_does(
    world: World, client: TestClient
) -> None:
    blocked(world)
    generation = world.lock_generation()
    confirm = client.get(f"/confirm/unlock?table=sales/orders&expect_generation={generation}")
    assert confirm.status_code == 200
    text = text_of(confirm.text)
    assert f"unlock releases the lock; batch '{HEAD}' is applied again" in text
    assert "within CONFIG_CACHE_SECONDS" in text
    assert f"turnstile unlock {world.uri} --expect-generation {generation} --yes" in text
    assert lock_of(world).state is LockState.FAILED  # showing it changed nothing
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    assert form == {"token": TOKEN, "table": "sales/orders", "expect_generation": str(generation)}
    done = client.post("/act/unlock", data=form)
    assert done.status_code == 200, done.text
    said = text_of(done.text)
    assert f"released the FAILED lock of {world.uri} (generation {generation})" in said
    assert f"batch '{HEAD}' will be applied again" in said
    lock = lock_of(world)
    assert lock.state is LockState.FREE and lock.allow_late == world.table.pointer(HEAD)


def test_a_lock_that_changed_since_it_was_shown_is_refused_in_the_clis_words(
    world: World, client: TestClient
) -> None:
    blocked(world)
    shown = world.lock_generation()
    world.fail(HEAD, error="failed again")  # rewritten while the operator read the page
    form = {"token": TOKEN, "table": "sales/orders", "expect_generation": str(shown)}
    refused = client.post("/act/unlock", data=form)
    assert refused.status_code == 409
    assert (
        f"error: {world.uri}: the lock is at generation {world.lock_generation()}, not {shown}: it changed "
        "since it was read; run turnstile status again and retry"
    ) in html.unescape(refused.text)
    assert lock_of(world).state is LockState.FAILED


def test_unlock_with_skip_head_drops_the_batch(world: World, client: TestClient) -> None:
    blocked(world)
    form = {"token": TOKEN, "table": "sales/orders", "expect_generation": str(world.lock_generation())}
    done = client.post("/act/unlock", data=form | {"skip_head": "1"})
    assert done.status_code == 200
    assert f"dropped the pointer of batch '{HEAD}'" in text_of(done.text)
    assert world.store.stat(world.table.pointer(HEAD)) is None
    assert lock_of(world).position == HEAD


def test_pause_resume_skip_and_reprocess_go_through_the_ops_layer(world: World, client: TestClient) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    generation = world.queue(HEAD)
    world.result("incremental/2024/05/01/12", world.upload("incremental/2024/05/01/12"))
    post = {"token": TOKEN, "table": "sales/orders"}
    paused = client.post("/act/pause", data=post | {"reason": "backfill <today>"})
    assert paused.status_code == 200
    assert f"paused {world.uri}: no job starts until: turnstile resume {world.uri}" in text_of(paused.text)
    page = client.get("/table/sales/orders")
    assert "backfill <today>" in text_of(page.text) and "backfill <today>" not in page.text
    resumed = client.post("/act/resume", data=post)
    assert f"lifted the pause of {world.uri}: jobs start again" in text_of(resumed.text)
    assert world.store.stat(world.table.pause) is None
    skipped = client.post("/act/skip", data=post | {"rel": HEAD, "reason": "repaired by hand"})
    assert skipped.status_code == 200, skipped.text
    assert f"(generation {generation}) is recorded as dropped by an operator" in text_of(skipped.text)
    assert world.store.stat(world.table.pointer(HEAD)) is None
    again = client.post("/act/reprocess", data=post | {"rel": "incremental/2024/05/01/12"})
    assert again.status_code == 200, again.text
    assert "will be committed once more" in text_of(again.text)
    refused = client.post("/act/reprocess", data=post | {"rel": "incremental/2024/05/01/11"})
    assert refused.status_code == 409
    assert "does not exist: there is no batch to reprocess there" in html.unescape(refused.text)


def test_retry_of_an_ordered_tables_batch_is_refused_as_the_cli_refuses_it(
    world: World, client: TestClient
) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.queue(HEAD)
    refused = client.post("/act/retry", data={"token": TOKEN, "table": "sales/orders", "rel": HEAD})
    assert refused.status_code == 409
    assert "belongs to an ordered table" in html.unescape(refused.text)


def test_a_read_only_console_offers_no_action_and_refuses_one(world: World) -> None:
    blocked(world)
    reader = client_of(console_of(world.store, read_only=True))  # type: ignore[arg-type]
    page = reader.get("/table/sales/orders")
    assert page.status_code == 200
    assert "/confirm/" not in page.text
    assert "Read-only" in page.text
    assert f"turnstile unlock {world.uri}" in text_of(page.text)  # the commands are still shown
    assert reader.get("/confirm/unlock?table=sales/orders").status_code == 403
    form = {"token": TOKEN, "table": "sales/orders", "expect_generation": str(world.lock_generation())}
    assert reader.post("/act/unlock", data=form).status_code == 403
    assert lock_of(world).state is LockState.FAILED


def test_a_folder_that_is_no_table_is_refused(client: TestClient) -> None:
    missing = client.get("/table/_config")
    assert missing.status_code == 409
    assert "is not a table folder" in html.unescape(missing.text)
    assert client.get(f"{BASE}/confirm/nothing?table=sales/orders").status_code == 404


def test_an_s3_bucket_is_shown_and_unlocked_with_its_s3_uris(s3_store: S3Store) -> None:
    world = World(s3_store, Table(s3_store.bucket, "sales/orders", "sales", "orders"))  # type: ignore[arg-type]
    blocked(world)
    client = client_of(console_of(s3_store))  # type: ignore[arg-type]
    page = client.get("/table/sales/orders")
    assert page.status_code == 200, page.text
    where = f"s3://{s3_store.bucket}/sales/orders"
    generation = world.lock_generation()
    assert f"turnstile unlock {where} --expect-generation {generation}" in text_of(page.text)
    assert f"gs://{s3_store.bucket}" not in page.text
    form = {"token": TOKEN, "table": "sales/orders", "expect_generation": str(generation)}
    done = client.post("/act/unlock", data=form)
    assert f"released the FAILED lock of {where}" in text_of(done.text)
    assert lock_of(world).state is LockState.FREE
