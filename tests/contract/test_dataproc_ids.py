"""Every job id and request id turnstile generates is one the real Dataproc API accepts.

The rule is the stub's (`invalid_ids`, the documented limits of `batches.create`), so the same
check that makes the stub answer 400 is run here over every input the product allows: any JOB_PREFIX
Settings accepts, any dataset and table identifier the paths accept, any table prefix a
DESTINATION_REGEX can produce, any batch path and any generations.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.contract.dataproc_stub import DataprocStub, invalid_ids
from tests.contract.test_dataproc_runner import MANIFEST, runner_for
from turnstile.config.settings import Settings
from turnstile.core.errors import JobError, Terminal
from turnstile.jobs.dataproc import request_id
from turnstile.names.paths import IDENTIFIER, Table
from turnstile.protocol.jobids import ordered_job_id, unordered_job_id

identifiers = st.from_regex(IDENTIFIER, fullmatch=True)
generations = st.integers(min_value=0, max_value=2**63 - 1)
names = st.text(max_size=300)  # table prefixes, pointers and rels: any object name text


@st.composite
def prefixes(draw: st.DrawFn) -> str:
    """Any JOB_PREFIX that Settings accepts (checked through Settings itself)."""
    prefix = draw(st.from_regex(r"[a-z][a-z0-9-]{0,19}", fullmatch=True))
    return Settings.from_env({"JOB_PREFIX": prefix}).job_prefix


@st.composite
def tables(draw: st.DrawFn) -> Table:
    return Table(draw(st.text(max_size=63)), draw(names), draw(identifiers), draw(identifiers))


@settings(max_examples=300, deadline=None)
@given(prefixes(), tables(), names, generations, generations)
def test_ordered_job_ids_and_their_request_ids_are_valid_for_the_api(
    prefix: str, table: Table, pointer: str, head_generation: int, lock_generation: int
) -> None:
    job_id = ordered_job_id(prefix, table, pointer, head_generation, lock_generation)
    assert invalid_ids(job_id, request_id(job_id)) is None, job_id


@settings(max_examples=300, deadline=None)
@given(prefixes(), tables(), names, generations)
def test_unordered_job_ids_and_their_request_ids_are_valid_for_the_api(
    prefix: str, table: Table, rel: str, generation: int
) -> None:
    job_id = unordered_job_id(prefix, table, rel, generation)
    assert invalid_ids(job_id, request_id(job_id)) is None, job_id


# -- the stub enforces the limits, as the API does --------------------------------------------------


@pytest.fixture
def stub() -> Iterator[DataprocStub]:
    server = DataprocStub().start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    "job_id",
    [
        "abc",  # too short
        "a" * 64,  # too long
        "Turnstile-sales-0123",  # upper case
        "turnstile_sales_0123",  # underscores
        "9turnstile-sales",  # not starting with a letter
        "turnstile-sales-",  # ending with a hyphen
    ],
)
def test_the_stub_refuses_a_batch_id_the_api_refuses(stub: DataprocStub, job_id: str) -> None:
    with pytest.raises(JobError) as caught:
        runner_for(stub).submit(job_id, MANIFEST)
    assert isinstance(caught.value, Terminal)
    assert "Invalid batch id" in str(caught.value)
    assert stub.batches == {}
    [create] = stub.requests
    assert create.query["batchId"] == job_id


@pytest.mark.parametrize(
    ("request_id_value", "valid"),
    [("a" * 40, True), ("A_z-09", True), ("a" * 41, False), ("with space", False), ("dot.ted", False)],
)
def test_the_request_id_rule(request_id_value: str, valid: bool) -> None:
    assert (invalid_ids("turnstile-ds-tbl-0123", request_id_value) is None) is valid


def test_a_generated_id_goes_through_the_stub(stub: DataprocStub) -> None:
    job_id = unordered_job_id("t", Table("b", "日本 语/x", "_", "_"), "%20 rel", 2**63 - 1)
    runner_for(stub).submit(job_id, MANIFEST)
    assert list(stub.batches) == [job_id]
