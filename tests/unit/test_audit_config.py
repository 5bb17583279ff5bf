"""`audits` in load.json and `_config/audit.sql` in the cascade, down to the manifest."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.unit.test_config import make_store
from turnstile.config.cascade import ConfigReader
from turnstile.config.load_config import LoadConfig
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import ConfigError
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.names.paths import parse_success
from turnstile.protocol.context import Invocation
from turnstile.protocol.manifests import manifest_batch


def test_audits_are_named_queries_with_unique_names() -> None:
    load = LoadConfig.model_validate({"audits": [{"name": "unique_id", "sql": "SELECT 1"}]})
    assert [a.name for a in load.audits] == ["unique_id"]
    twice = [{"name": "a", "sql": "SELECT 1"}, {"name": "a", "sql": "SELECT 2"}]
    with pytest.raises(ValidationError, match=r"audits\[1\].name 'a' is used twice"):
        LoadConfig.model_validate({"audits": twice})
    with pytest.raises(ValidationError, match="sql is blank"):
        LoadConfig.model_validate({"audits": [{"name": "a", "sql": "  "}]})
    with pytest.raises(ValidationError, match="check"):  # a misspelt key is refused, not ignored
        LoadConfig.model_validate({"audits": [{"name": "a", "sql": "SELECT 1", "check": "x"}]})


def test_the_nearest_audit_sql_reaches_the_manifest_with_its_uri_and_the_digest() -> None:
    store = make_store(
        {
            "_config/audit.sql": "SELECT 1",
            "ds/tbl/_config/audit.sql": "SELECT 2",
            "ds/tbl/b1/_config/load.json": {"format": "csv"},
        }
    )
    resolved = ConfigReader(store).resolve("ds/tbl/b1/")
    assert (resolved.audit_sql, resolved.audit_source) == ("SELECT 2", "ds/tbl/_config/audit.sql")
    clock = SystemClock()
    inv = Invocation(
        store, InlineRunner(store, MemoryTables()), Settings.from_env({}), clock, "i", clock.now()
    )
    batch = manifest_batch(inv, parse_success(store.bucket, "ds/tbl/b1/_SUCCESS"), resolved, 7, data_uris=())
    assert batch.audit_sql == "SELECT 2"
    assert batch.audit_source == f"gs://{store.bucket}/ds/tbl/_config/audit.sql"
    without = ConfigReader(make_store({"ds/tbl/b1/_config/load.json": {"format": "csv"}})).resolve(
        "ds/tbl/b1/"
    )
    assert (without.audit_sql, without.audit_source) == (None, None)
    assert resolved.digest != without.digest  # the audits are part of what the commit's digest names


def test_another_sql_file_in_config_is_still_refused_naming_audit_sql() -> None:
    store = make_store({"ds/tbl/_config/checks.sql": "SELECT 1"})
    with pytest.raises(ConfigError, match=r"or audit\.sql \(SELECTs"):
        ConfigReader(store).resolve("ds/tbl/b1/")
