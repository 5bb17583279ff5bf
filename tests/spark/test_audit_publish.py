"""`turnstile publish` on the job side: a batch whose audits failed is published from its staged
commit as it is, once, recorded as PUBLISHED_OVERRIDE with who and why."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from tests.spark.test_audits import NO_NEGATIVE, main_batches, refs, result, staged_rows
from turnstile.config.audits import BRANCH
from turnstile.names.publishing import override_name
from turnstile.spark import audits
from turnstile.state.records import AUDIT_FAILURE, BatchOutcome, ManifestBatch, PublishOverride
from turnstile.store.gcs import GcsStore

pytestmark = pytest.mark.spark


def publish(kit: Kit, batch: ManifestBatch, by: str = "ana", reason: str = "known refunds") -> None:
    """What `turnstile publish` leaves for the batch's next job."""
    name = override_name(batch.table_prefix, batch.rel, batch.success_generation)
    kit.store.write(name, PublishOverride(by=by, reason=reason, at=datetime.now(UTC)).encode())


def test_a_published_batch_goes_to_main_from_its_staged_commit_without_its_audits_and_once(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[NO_NEGATIVE])
    first = kit.batch("1", csv("id,amount", "1,10"))
    assert kit.run(first).succeeded
    bad = kit.batch("2", csv("id,amount", "2,-5"))
    assert not kit.run(bad, job_id="job-2").succeeded
    failed = result(kit, bad)
    assert failed.outcome is BatchOutcome.FAILED and failed.error_kind == AUDIT_FAILURE
    staged = refs(kit)[BRANCH]
    publish(kit, bad)
    audited: list[int] = []
    audit = audits.audit

    def counted(*args: Any, **kwargs: Any) -> None:
        audited.append(args[3])
        audit(*args, **kwargs)

    monkeypatch.setattr(audits, "audit", counted)
    done = kit.run(bad, job_id="job-3")
    assert done.succeeded, done.error
    assert done.outcomes == {"2": BatchOutcome.PUBLISHED_OVERRIDE}
    assert audited == []  # its audits did not run again
    got = result(kit, bad)
    assert got.outcome is BatchOutcome.PUBLISHED_OVERRIDE
    assert (got.published_by, got.publish_reason, got.snapshot_id) == ("ana", "known refunds", staged)
    assert refs(kit)["main"] == staged  # the staged commit itself, not a second one
    assert kit.rows() == [(1, 10), (2, -5)]
    assert main_batches(kit) == [f"1#{first.success_generation}", f"2#{bad.success_generation}"]
    again = kit.run(bad, job_id="job-4")  # a retry: in main already, not committed twice
    assert again.succeeded and again.outcomes == {"2": BatchOutcome.PUBLISHED_OVERRIDE}
    assert kit.rows() == [(1, 10), (2, -5)]
    assert [s.get("turnstile.batch") for s in kit.snapshots()].count(f"2#{bad.success_generation}") == 1
    assert result(kit, bad).published_by == "ana"


def test_a_publish_whose_staged_commit_is_gone_fails_naming_why_and_is_forgotten(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[NO_NEGATIVE])
    assert kit.run(kit.batch("1", csv("id,amount", "1,10"))).succeeded
    bad = kit.batch("2", csv("id,amount", "2,-5"))
    assert not kit.run(bad, job_id="job-2").succeeded
    spark.sql(f"INSERT INTO {kit.table} VALUES (9, 9)")  # main moved: a fix by hand
    publish(kit, bad)
    done = kit.run(bad, job_id="job-3")
    assert not done.succeeded
    assert "its staged commit is no longer on branch" in (done.error or "")
    assert kit.rows() == [(1, 10), (9, 9)]  # nothing published
    name = override_name(bad.table_prefix, bad.rel, bad.success_generation)
    assert kit.store.read(name) is None  # the next unlock writes and audits the batch again
    assert staged_rows(kit)[:1] == [(1, 10)]
