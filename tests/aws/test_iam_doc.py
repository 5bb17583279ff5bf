"""The IAM policies of docs/DEPLOY-AWS.md, read as the JSON they are and evaluated the way IAM
evaluates them (an explicit Deny wins, else an Allow must match; `*` and `?` in resources; the
condition operators the policies use): no write on `*`, and each role may write what turnstile
writes and nothing else (the batches only their outputs, nobody a `_config/` file by overwriting).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tests.log_events import ROOT

SECTION = "## IAM (least privilege)"
ROLES = ("Lambda functions", "Job execution role", "Operators", "Scheduler")
PLACEHOLDERS = {"BUCKET", "STATE", "ARTIFACTS", "WAREHOUSE", "REGION", "ACCOUNT", "APP", "JOB_ROLE"}
PLACEHOLDERS |= {"DATASET", "QUEUE", "KEY_ID"}
READ_VERBS = ("Get", "List", "Describe", "Head")


def iam_section() -> str:
    text = (ROOT / "docs" / "DEPLOY-AWS.md").read_text()
    assert f"\n{SECTION}\n" in text, f"docs/DEPLOY-AWS.md has no {SECTION!r} section"
    return text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]


def policies() -> dict[str, dict[str, Any]]:
    """The policy document under each `### <role>` heading of the IAM section (its first ```json
    block), by the heading's text."""
    found = {}
    for block in iam_section().split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        match = re.search(r"```json\n(.*?)\n```", body, re.S)
        if match:
            found[title.strip()] = json.loads(match.group(1))
    return found


def policy(role: str) -> Policy:
    matching = [doc for title, doc in policies().items() if title.startswith(role)]
    assert len(matching) == 1, (
        f"docs/DEPLOY-AWS.md, {SECTION}: one `### {role}` policy, found {len(matching)}"
    )
    return Policy(matching[0])


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def wildcard(pattern: str, value: str) -> bool:
    """IAM's matching: `*` any run of characters (`/` and `:` included), `?` one; case-sensitive."""
    return (
        re.fullmatch(".*".join(".".join(map(re.escape, p.split("?"))) for p in pattern.split("*")), value)
        is not None
    )


@dataclass
class Policy:
    document: dict[str, Any]

    @property
    def statements(self) -> list[dict[str, Any]]:
        return list(self.document["Statement"])

    def _condition_holds(self, statement: dict[str, Any], context: dict[str, str]) -> bool:
        for operator, tests in statement.get("Condition", {}).items():
            for key, wanted in tests.items():
                values = as_list(wanted)
                if operator == "StringEquals":
                    holds = context.get(key) in values
                elif operator == "Null":
                    holds = (key not in context) == (values == ["true"])
                else:
                    raise AssertionError(f"condition operator {operator} unknown to this evaluator")
                if not holds:
                    return False
        return True

    def _matches(
        self, statement: dict[str, Any], action: str, resource: str, context: dict[str, str]
    ) -> bool:
        return (
            any(wildcard(a.lower(), action.lower()) for a in as_list(statement["Action"]))
            and any(wildcard(r, resource) for r in as_list(statement["Resource"]))
            and self._condition_holds(statement, context)
        )

    def allows(self, action: str, resource: str, context: dict[str, str] | None = None) -> bool:
        context = context or {}
        matched = [s for s in self.statements if self._matches(s, action, resource, context)]
        if any(s["Effect"] == "Deny" for s in matched):
            return False
        return any(s["Effect"] == "Allow" for s in matched)


def obj(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


UPSTREAM = ["ds/tbl/2024/05/01/13/part-0.csv", "ds/tbl/2024/05/01/13/_SUCCESS"]
CLAIM = "ds/tbl/2024/05/01/13/_claimed_part-0.csv_created_at_1714567890123456"
MANIFEST = "ds/tbl/_turnstile/jobs/turnstile-ds-tbl-0123456789abcdef.manifest.json"
STATE = ["ds/tbl/_bqlock", "ds/tbl/_BACKFILL", "ds/tbl/_backlog/2024/05/01/13/_SUCCESS", CLAIM, MANIFEST]
RUN_RECORD = "_turnstile/emr-runs/turnstile-ds-tbl-0123456789abcdef.json"
CONFIGS = ["ds/tbl/_config/load.json", "_config/load.json", "ds/_config/transform.sql"]
CONFIG_LOOKALIKES = ["ds/tbl/_config/_turnstile/results/x.json", "ds/_config/_failed/x.csv"]
RESULT = "ds/tbl/_turnstile/results/2024/05/01/13/17.json"
JOB_OUTPUTS = [
    RESULT,
    "ds/tbl/_turnstile/jobs/turnstile-ds-tbl-0123456789abcdef.done",
    "ds/tbl/_failed/x/rows.csv",
]
WRITES = ("s3:PutObject", "s3:DeleteObject")
SPOOL = [  # DRIVER=warm: what a driver (a job run under the job role) writes in the spool
    "_turnstile/driver/drivers/turnstile-drv-0a1b2c3d-17.json",
    "_turnstile/driver/requests/00001714567890123456-turnstile-ds-tbl-0123456789abcdef.json",
    "_turnstile/driver/jobs/turnstile-ds-tbl-0123456789abcdef/started.json",
    "_turnstile/driver/jobs/turnstile-ds-tbl-0123456789abcdef/finished.json",
    "_turnstile/driver/history.json",
]


# -- the documents ------------------------------------------------------------------------------------


def test_each_role_has_one_policy_document_of_named_explicit_statements() -> None:
    found = policies()
    for role in ROLES:
        assert sum(title.startswith(role) for title in found) == 1, f"no `### {role}` policy in {SECTION}"
    for title, doc in found.items():
        assert doc["Version"] == "2012-10-17", title
        sids = [s["Sid"] for s in doc["Statement"]]
        assert len(sids) == len(set(sids)), f"{title}: duplicate Sid"
        for statement in doc["Statement"]:
            where = f"{title}, {statement['Sid']}"
            assert statement["Effect"] in ("Allow", "Deny"), where
            for action in as_list(statement["Action"]):
                assert re.fullmatch(r"[a-z0-9-]+:[A-Z][A-Za-z]+", action), (
                    f"{where}: {action} is not one action"
                )
            for resource in as_list(statement["Resource"]):
                words = set(re.findall(r"\b[A-Z][A-Z_]+\b", resource))
                assert words <= PLACEHOLDERS, f"{where}: unknown placeholder {words - PLACEHOLDERS}"


def everything(resource: str) -> bool:
    """A resource that names no particular thing: `*`, an S3 ARN whose bucket is a wildcard
    (`arn:aws:s3:::*`), or another ARN whose resource part is wildcards apart from its type
    (`...:database/*`, `...:table/*/*`, `...:log-group:*`, `...:*`)."""
    if resource == "*":
        return True
    fields = resource.split(":", 5)
    assert len(fields) == 6 and fields[0] == "arn", f"{resource} is not an ARN"
    service, part = fields[2], fields[5]
    if service == "s3":
        return re.fullmatch(r"\*+", part.split("/", 1)[0]) is not None
    return re.fullmatch(r"([a-z-]+[/:])?[*/:]*\*", part) is not None


def test_no_role_may_write_everything_of_a_kind() -> None:
    found = policies()
    assert found, f"no policy documents in docs/DEPLOY-AWS.md, {SECTION}"
    for title, doc in found.items():
        for statement in doc["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            writes = [a for a in as_list(statement["Action"]) if not a.split(":")[1].startswith(READ_VERBS)]
            for resource in as_list(statement["Resource"]):
                assert not (writes and everything(resource)), (
                    f"{title}, {statement['Sid']}: {writes} on {resource}, which names nothing in particular"
                )


def test_everything_catches_what_it_should() -> None:
    for resource in (
        "*",
        "arn:aws:s3:::*",
        "arn:aws:glue:REGION:ACCOUNT:table/*/*",
        "arn:aws:logs:REGION:ACCOUNT:*",
    ):
        assert everything(resource), resource
    for resource in (
        "arn:aws:s3:::BUCKET/*",
        "arn:aws:s3:::my-bucket/*",
        "arn:aws:glue:REGION:ACCOUNT:table/DATASET/*",
    ):
        assert not everything(resource), resource


# -- what each role may write -------------------------------------------------------------------------


def test_the_job_role_writes_only_job_outputs_and_the_warehouse() -> None:
    job = policy("Job execution role")
    for key in UPSTREAM + STATE + CONFIGS + JOB_OUTPUTS + [RUN_RECORD]:
        assert job.allows("s3:GetObject", obj("BUCKET", key)), f"the job must read {key}"
    for key in JOB_OUTPUTS:
        assert job.allows("s3:PutObject", obj("BUCKET", key)), f"the job must write {key}"
    assert job.allows("s3:PutObject", obj("STATE", RESULT)), "the job writes its result records"
    for bucket in ("BUCKET", "STATE"):
        for key in UPSTREAM + STATE + CONFIGS + CONFIG_LOOKALIKES + [RUN_RECORD, "_STATE_BUCKET"]:
            for write in WRITES:
                assert not job.allows(write, obj(bucket, key)), f"the job may not {write} {bucket}/{key}"
    for write in (*WRITES, "s3:GetObject"):
        assert job.allows(write, obj("WAREHOUSE", "iceberg/ds/tbl/data/x.parquet")), write
    assert not job.allows("s3:PutObject", obj("ARTIFACTS", "turnstile/main.py"))
    assert job.allows("s3:ListBucket", "arn:aws:s3:::STATE"), "a missing record reads as 404, not 403"


def test_a_warm_driver_under_the_job_role_keeps_the_spool_and_nothing_else_of_the_state() -> None:
    job = policy("Job execution role")
    for bucket in ("BUCKET", "STATE"):  # the spool is in the state bucket when there is one
        for key in SPOOL:
            for action in ("s3:GetObject", *WRITES):
                assert job.allows(action, obj(bucket, key)), f"a driver must {action} {bucket}/{key}"
        for key in ("_turnstile/driver-lookalike/x.json", "ds/_turnstile/driver/x.json", RUN_RECORD):
            for write in WRITES:
                assert not job.allows(write, obj(bucket, key)), f"the job may not {write} {bucket}/{key}"


def test_the_job_role_commits_to_the_datasets_named_only() -> None:
    job = policy("Job execution role")
    glue = "arn:aws:glue:REGION:ACCOUNT"
    assert job.allows("glue:UpdateTable", f"{glue}:table/DATASET/orders")
    assert job.allows("glue:CreateDatabase", f"{glue}:database/DATASET")
    assert not job.allows("glue:UpdateTable", f"{glue}:table/other/orders")
    assert not job.allows("glue:DeleteTable", f"{glue}:table/DATASET/orders")


def test_the_functions_write_state_and_never_a_config() -> None:
    functions = policy("Lambda functions")
    for bucket in ("BUCKET", "STATE"):
        for key in STATE + JOB_OUTPUTS + SPOOL + [RUN_RECORD]:
            for action in ("s3:GetObject", *WRITES):
                assert functions.allows(action, obj(bucket, key)), f"the functions must {action} {key}"
    for key in CONFIGS:
        assert functions.allows("s3:GetObject", obj("BUCKET", key))
        for write in WRITES:
            assert not functions.allows(write, obj("BUCKET", key)), f"the functions may not {write} {key}"
            assert not functions.allows(write, obj("BUCKET", key), {"s3:if-none-match": "*"})


def test_operators_create_configs_but_never_replace_or_delete_one() -> None:
    operators = policy("Operators")
    for key in UPSTREAM + STATE:
        for action in ("s3:GetObject", *WRITES):
            assert operators.allows(action, obj("BUCKET", key)), f"operators must {action} {key}"
    for key in CONFIGS:
        assert operators.allows("s3:GetObject", obj("BUCKET", key))
        assert operators.allows("s3:PutObject", obj("BUCKET", key), {"s3:if-none-match": "*"}), "create"
        assert not operators.allows("s3:PutObject", obj("BUCKET", key)), f"operators may not overwrite {key}"
        assert not operators.allows("s3:DeleteObject", obj("BUCKET", key)), f"operators may not delete {key}"


@pytest.mark.parametrize("role", ["Lambda functions", "Operators"])
def test_who_starts_job_runs_passes_the_job_role_alone_to_emr_serverless(role: str) -> None:
    doc = policy(role)
    app = "arn:aws:emr-serverless:REGION:ACCOUNT:/applications/APP"
    assert doc.allows("emr-serverless:StartJobRun", app)
    assert doc.allows("emr-serverless:CancelJobRun", f"{app}/jobruns/r1")
    assert not doc.allows(
        "emr-serverless:StartJobRun", "arn:aws:emr-serverless:REGION:ACCOUNT:/applications/other"
    )
    job_role = "arn:aws:iam::ACCOUNT:role/JOB_ROLE"
    to_emr = {"iam:PassedToService": "emr-serverless.amazonaws.com"}
    assert doc.allows("iam:PassRole", job_role, to_emr)
    assert not doc.allows("iam:PassRole", job_role, {"iam:PassedToService": "ec2.amazonaws.com"})
    assert not doc.allows("iam:PassRole", "arn:aws:iam::ACCOUNT:role/admin", to_emr)


def test_the_scheduler_invokes_the_sweeper_only() -> None:
    scheduler = policy("Scheduler")
    functions = "arn:aws:lambda:REGION:ACCOUNT:function"
    assert scheduler.allows("lambda:InvokeFunction", f"{functions}:turnstile-sweeper")
    assert not scheduler.allows("lambda:InvokeFunction", f"{functions}:turnstile-events")


def test_the_evaluator_denies_what_a_deny_names_and_what_no_allow_names() -> None:
    doc = Policy(
        {
            "Statement": [
                {"Sid": "A", "Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::B/*"},
                {
                    "Sid": "D",
                    "Effect": "Deny",
                    "Action": "s3:PutObject",
                    "Resource": "arn:aws:s3:::B/*/_config/*",
                },
            ]
        }
    )
    assert doc.allows("s3:PutObject", "arn:aws:s3:::B/a/b.csv")
    assert not doc.allows("s3:PutObject", "arn:aws:s3:::B/ds/_config/load.json")
    assert not doc.allows("s3:DeleteObject", "arn:aws:s3:::B/a/b.csv")
    assert not doc.allows("s3:PutObject", "arn:aws:s3:::C/a/b.csv")
    assert wildcard("arn:aws:s3:::B/*/_turnstile/jobs/*.done", "arn:aws:s3:::B/ds/tbl/_turnstile/jobs/j.done")
    assert not wildcard("arn:aws:s3:::B/*/_turnstile/*", "arn:aws:s3:::B/_turnstile/emr-runs/j.json")
