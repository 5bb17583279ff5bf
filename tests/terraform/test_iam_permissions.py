"""What every principal of terraform/ may do, by permission rather than by role name: each grant's
role is resolved to its permissions (predefined roles through fixtures/predefined_roles.json,
copied from Google's IAM roles reference; custom roles through their `permissions` in the HCL), so
a predefined role that carries more than its name says (roles/dataproc.worker and its project-wide
storage.objects.*) fails here, where the role-name allow-list of test_terraform.py cannot see it.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.test_terraform import (
    CONFIGS,
    JOB_OUTPUTS,
    STATE,
    UPSTREAM,
    Config,
    _grants,
    allows,
    tf,
)
from turnstile.config.settings import Settings

__all__ = ["tf"]  # the module's parsed terraform/ (a pytest fixture)

FIXTURE = Path(__file__).parent / "fixtures" / "predefined_roles.json"
REFERENCE = "https://cloud.google.com/iam/docs/roles-permissions/"

OBJECT_WRITES = ("storage.objects.create", "storage.objects.delete")
# Nothing of turnstile holds these on the whole project: storage is granted per bucket, IAM policies
# and service accounts are nobody's to change, and other workloads' Dataproc resources stay out of
# reach (the functions' custom role creates, reads and cancels batches only).
NEVER_PROJECT_WIDE = (
    "storage.*",
    "*.setIamPolicy",
    "iam.serviceAccounts.*",
    "iam.roles.*",
    "dataproc.batches.delete",
    "dataproc.clusters.*",
    "dataproc.jobs.*",
)

# Permissions a variable may add to a custom role, as its validation in variables.tf allows them
# (test_terraform.py runs that validation): patterns, matched with fnmatch.
VARIABLE_PERMISSIONS = {"catalog_extra_permissions": frozenset({"biglake.*", "bigquery.*"})}

CLAIM = "ds/tbl/2024/05/01/13/_claimed_part-0.csv_created_at_1714567890123456"
MANIFEST = "ds/tbl/_turnstile/jobs/turnstile-ds-tbl-0123456789abcdef.manifest.json"
RESULT = "ds/tbl/_turnstile/results/2024/05/01/13/17.json"
CONFIG_LOOKALIKES = ["ds/tbl/_config/_turnstile/results/x.json", "ds/_config/_failed/x.csv"]
# What the state bucket holds (turnstile.names.placement): a batch writes only its result records there.
STATE_OBJECTS = ["ds/tbl/_bqlock", "ds/tbl/_backlog/2024/05/01/13/_SUCCESS", CLAIM, MANIFEST]


@cache
def predefined() -> dict[str, frozenset[str]]:
    data = json.loads(FIXTURE.read_text())
    return {role: frozenset(entry["permissions"]) for role, entry in data["roles"].items()}


def custom_role_permissions(tf: Config, name: str) -> frozenset[str]:
    """A custom role's permissions: a literal list, or an expression of locals (every quoted
    dotted name in them, both branches of a conditional) and of variables in VARIABLE_PERMISSIONS.
    Any other reference fails, so a role this cannot read fails the tests."""
    permissions = tf.resource("google_project_iam_custom_role", name)["permissions"]
    if isinstance(permissions, list):
        assert all(isinstance(p, str) and "${" not in p for p in permissions), permissions
        return frozenset(permissions)
    found: set[str] = set()
    for kind, key in re.findall(r"\b(local|var)\.(\w+)", permissions):
        if kind == "local":
            found.update(
                p for p in str(tf.locals[key]).split('"')[1::2] if re.fullmatch(r"[a-z]+(\.\w+)+", p)
            )
        else:
            assert key in VARIABLE_PERMISSIONS, f"custom role {name}: what may var.{key} add?"
            found.update(VARIABLE_PERMISSIONS[key])
    stripped = re.sub(r"\b(local|var)\.\w+", "", permissions)
    assert not re.search(r"\b[a-z_]+\.[a-z_]+", stripped), (
        f"custom role {name}: unread reference in {permissions}"
    )
    assert found, f"custom role {name}: no permissions found in {permissions}"
    return frozenset(found)


def role_permissions(tf: Config, role: str) -> frozenset[str]:
    if role.startswith("roles/"):
        assert role in predefined(), (
            f"{role}: add its permissions and its reference page to {FIXTURE.relative_to(FIXTURE.parents[3])}"
        )
        return predefined()[role]
    custom = re.fullmatch(r"\$\{google_project_iam_custom_role\.(\w+)\.id\}", role)
    assert custom, f"role {role!r} is neither predefined nor one of terraform/'s custom roles"
    return custom_role_permissions(tf, custom.group(1))


def holds(permissions: frozenset[str], wanted: str) -> bool:
    return any(fnmatch.fnmatchcase(wanted, held) for held in permissions)


def principal(member: str) -> str:
    """Who a grant's member is: a service account of the deployment by its resource name,
    `operators` (var.operator_members), or `gcs-agent` (the Cloud Storage service agent)."""
    account = re.fullmatch(r"\$\{google_service_account\.(\w+)\.member\}", member)
    if account:
        return account.group(1)
    if member == "${each.value}":
        return "operators"
    if member == "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}":
        return "gcs-agent"
    raise AssertionError(f"unknown member {member!r}: teach principal() who it is")


def project_grants(tf: Config) -> Iterator[tuple[str, str, str, frozenset[str]]]:
    """(resource name, principal, role, permissions) of every project-level grant."""
    for kind, name, body in _grants(tf):
        if kind.startswith("google_project_"):
            if body["member"] == "${each.value}":
                assert body["for_each"] == "${toset(var.operator_members)}", name
            yield name, principal(body["member"]), body["role"], role_permissions(tf, body["role"])


def acts_as(tf: Config) -> dict[str, set[str]]:
    """Which service accounts each principal may act as (actAs or token creation on it)."""
    edges: dict[str, set[str]] = {}
    for kind, name, body in _grants(tf):
        if kind != "google_service_account_iam_member":
            continue
        permissions = role_permissions(tf, body["role"])
        if holds(permissions, "iam.serviceAccounts.actAs") or holds(
            permissions, "iam.serviceAccounts.getAccessToken"
        ):
            target = re.fullmatch(r"\$\{google_service_account\.(\w+)\.name\}", body["service_account_id"])
            assert target, f"{kind}.{name}: acts as what? {body['service_account_id']}"
            edges.setdefault(principal(body["member"]), set()).add(target.group(1))
    return edges


def project_permissions(tf: Config, who: str, through: tuple[str, ...] = ()) -> frozenset[str]:
    """What `who` may do project-wide: its own project-level grants and, through actAs, those of
    every service account it may act as (a batch it submits runs with the batch account's rights)."""
    own = {p for _, member, _, permissions in project_grants(tf) if member == who for p in permissions}
    for account in acts_as(tf).get(who, set()) - set(through):
        own |= project_permissions(tf, account, (*through, who))
    return frozenset(own)


def on_bucket(body: dict[str, Any], bucket: str) -> bool:
    """Whether a bucket grant is on `bucket` (a google_storage_bucket's resource name): by reference,
    or as one of the buckets its for_each iterates over (`bucket = each.value`)."""
    ref = "state[0]" if bucket == "state" else bucket
    if body["bucket"] == f"${{google_storage_bucket.{ref}.name}}":
        return True
    return body["bucket"] == "${each.value}" and bucket in re.findall(
        r"google_storage_bucket\.(\w+)", str(body.get("for_each", ""))
    )


def bucket_grants(tf: Config, member: str, bucket: str) -> list[dict[str, Any]]:
    return [
        body
        for _, body in tf.of_type("google_storage_bucket_iam_member")
        if body["member"] == member and on_bucket(body, bucket)
    ]


def may(tf: Config, member: str, permission: str, bucket: str, object_name: str) -> bool:
    """Whether `member` holds `permission` on an object of `bucket`, through a grant on that bucket
    whose condition holds for the object (project-level grants: the tests above keep storage off)."""
    return any(
        holds(role_permissions(tf, grant["role"]), permission) and allows(tf, grant, object_name)
        for grant in bucket_grants(tf, member, bucket)
    )


def worker_without_storage() -> frozenset[str]:
    return frozenset(p for p in predefined()["roles/dataproc.worker"] if not p.startswith("storage."))


# -- the fixture ------------------------------------------------------------------------------------------


def test_every_predefined_role_granted_has_its_permissions_and_source_in_the_fixture(tf: Config) -> None:
    data = json.loads(FIXTURE.read_text())
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["retrieved"])
    for role, entry in data["roles"].items():
        assert entry["source"] == f"{REFERENCE}{role.split('/')[1].split('.')[0]}#{role.split('/')[1]}", role
        assert entry["permissions"] == sorted(set(entry["permissions"])) and entry["permissions"], role
    granted = {body["role"] for _, _, body in _grants(tf) if body["role"].startswith("roles/")}
    assert granted, "no predefined role granted at all?"
    assert granted <= set(data["roles"]), f"not in the fixture: {sorted(granted - set(data['roles']))}"


# -- project-level grants ---------------------------------------------------------------------------------


def test_no_project_level_role_of_the_batch_account_creates_or_deletes_objects(tf: Config) -> None:
    """A project-level role with storage.objects.create or delete lets the batches (the table's
    transform.sql, any staged jar) write and delete every object of every bucket in the project:
    the inbound bucket's locks, pointers, configs and upstream data, whatever its conditional
    grants say (IAM is additive)."""
    grants = [(name, role, perms) for name, who, role, perms in project_grants(tf) if who == "batch"]
    assert grants, "the batch account holds no project-level role at all?"
    for name, role, permissions in grants:
        for write in OBJECT_WRITES:
            assert not holds(permissions, write), (
                f"google_project_iam_member.{name}: {role} carries {write} on every bucket of the project"
            )


def test_no_principal_holds_storage_or_iam_permissions_project_wide(tf: Config) -> None:
    principals = set()
    for name, who, role, permissions in project_grants(tf):
        principals.add(who)
        for permission in permissions:
            for pattern in NEVER_PROJECT_WIDE:
                assert not fnmatch.fnmatchcase(permission, pattern), (
                    f"google_project_iam_member.{name}: {role} gives {who} {permission} project-wide"
                )
    assert {"batch", "functions", "operators", "trigger", "build", "gcs-agent"} <= principals


def test_acting_as_the_batch_account_reaches_no_object_writes_project_wide(tf: Config) -> None:
    """The functions and the operators submit batches as the batch account: whatever it may do
    project-wide, they may do through a batch of their choosing."""
    edges = acts_as(tf)
    for who in ("functions", "operators"):
        assert edges.get(who) == {"batch"}, f"{who} act as {edges.get(who)}"
        reach = project_permissions(tf, who)
        assert holds(reach, "dataproc.batches.create")
        for write in OBJECT_WRITES:
            assert not holds(reach, write), f"{who} reach {write} on every bucket through the batch account"


def test_the_batch_worker_role_is_dataproc_worker_without_storage(tf: Config) -> None:
    """Dataproc Serverless requires Dataproc Worker of its batch service account; the custom role
    holds all of its permissions but storage.*, granted per bucket instead. When Google changes the
    role, refreshing the fixture makes this fail until the custom role follows."""
    role = tf.resource("google_project_iam_custom_role", "batch_worker")
    assert role["permissions"] == sorted(role["permissions"])
    assert set(role["permissions"]) == worker_without_storage()
    grant = tf.resource("google_project_iam_member", "batch_worker")
    assert grant["role"] == "${google_project_iam_custom_role.batch_worker.id}"
    assert principal(grant["member"]) == "batch"
    assert "roles/dataproc.worker" not in {body["role"] for _, _, body in _grants(tf)}


def test_these_checks_catch_a_role_that_carries_object_writes(tf: Config) -> None:
    """Not vacuous: Dataproc Worker itself, granted project-wide, fails them; an unknown predefined
    role fails for want of its permissions."""
    wide = Config(dict(tf.resources), tf.locals, tf.variables, tf.outputs)
    wide.resources[("google_project_iam_member", "too_wide")] = {
        "project": "${var.project_id}",
        "role": "roles/dataproc.worker",
        "member": "${google_service_account.batch.member}",
    }
    with pytest.raises(AssertionError, match=r"roles/dataproc.worker carries storage.objects.create"):
        test_no_project_level_role_of_the_batch_account_creates_or_deletes_objects(wide)
    with pytest.raises(AssertionError, match="project-wide"):
        test_no_principal_holds_storage_or_iam_permissions_project_wide(wide)
    with pytest.raises(AssertionError, match="through the batch account"):
        test_acting_as_the_batch_account_reaches_no_object_writes_project_wide(wide)
    wide.resources[("google_project_iam_member", "too_wide")]["role"] = "roles/unknown.role"
    with pytest.raises(AssertionError, match=r"predefined_roles\.json"):
        list(project_grants(wide))


# -- bucket-level grants ----------------------------------------------------------------------------------


def test_the_batch_account_writes_only_its_records_in_the_state_bucket(tf: Config) -> None:
    """It reads its manifest and writes its result records there; the locks, the backlog pointers
    and the claims are the functions' and the operators' to write."""
    batch = "${google_service_account.batch.member}"
    for name in [*STATE_OBJECTS, RESULT]:
        assert may(tf, batch, "storage.objects.get", "state", name), f"the batches must read {name}"
    for write in OBJECT_WRITES:
        assert may(tf, batch, write, "state", RESULT), f"the batches must {write} {RESULT}"
    for name in STATE_OBJECTS:
        for write in OBJECT_WRITES:
            assert not may(tf, batch, write, "state", name), f"the batches may not {write} {name}"


def test_the_batch_account_writes_no_manifest_claim_or_config_in_the_inbound_bucket(tf: Config) -> None:
    """Beside test_terraform.py's upstream data, state objects and configs: a manifest says which
    batches a job covers and a claim who handles an event; both are the functions' to write. Nor
    a job output's folder nested in a `_config/` folder."""
    batch = "${google_service_account.batch.member}"
    for name in (MANIFEST, CLAIM, *CONFIG_LOOKALIKES):
        assert may(tf, batch, "storage.objects.get", "inbound", name)
        for write in OBJECT_WRITES:
            assert not may(tf, batch, write, "inbound", name), f"the batches may not {write} {name}"
    for name in JOB_OUTPUTS:
        for write in OBJECT_WRITES:
            assert may(tf, batch, write, "inbound", name), f"the batches must {write} {name}"


def test_the_functions_write_turnstile_objects_but_never_configs(tf: Config) -> None:
    """The functions write locks, pointers, claims, manifests and records, never a `_config/` file:
    a transform or a load config is a reviewed change."""
    functions = "${google_service_account.functions.member}"
    for name in [*UPSTREAM, *STATE, *CONFIGS, *JOB_OUTPUTS, CLAIM, MANIFEST]:
        assert may(tf, functions, "storage.objects.get", "inbound", name), f"the functions must read {name}"
    for name in [*STATE, *JOB_OUTPUTS, CLAIM, MANIFEST]:
        for write in OBJECT_WRITES:
            assert may(tf, functions, write, "inbound", name), f"the functions must {write} {name}"
    for name in CONFIGS:
        for write in (*OBJECT_WRITES, "storage.objects.update"):
            assert not may(tf, functions, write, "inbound", name), f"the functions may not {write} {name}"
    for name in [*STATE_OBJECTS, RESULT]:
        for write in OBJECT_WRITES:
            assert may(tf, functions, write, "state", name), f"the functions must {write} {name}"


BATCH_BUCKETS = ["inbound", "state", "warehouse", "artifacts", "dataproc_staging"]


def test_the_batches_stage_in_a_bucket_of_their_own(tf: Config) -> None:
    """Without a staging bucket, Dataproc uses project-level staging and temp buckets it creates
    and names itself, which the batch account could only reach through project-wide storage
    permissions: the deployment creates one and passes it with every batch."""
    bucket = tf.resource("google_storage_bucket", "dataproc_staging")
    assert bucket["location"] == "${local.dataproc_region}"
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    env = tf.locals["function_env_all"]
    assert env["DATAPROC_STAGING_BUCKET"] == "${google_storage_bucket.dataproc_staging.name}"
    assert "DATAPROC_STAGING_BUCKET" in Settings.variables()
    members = {
        body["member"]
        for _, body in tf.of_type("google_storage_bucket_iam_member")
        if on_bucket(body, "dataproc_staging")
    }
    assert members == {"${google_service_account.batch.member}"}, "the batches' own"
    batch = "${google_service_account.batch.member}"
    for write in (*OBJECT_WRITES, "storage.objects.get", "storage.objects.update"):
        assert may(tf, batch, write, "dataproc_staging", "google-cloud-dataproc-metainfo/x/driveroutput")


@pytest.mark.parametrize("bucket", BATCH_BUCKETS)
def test_the_batch_account_reads_the_metadata_of_each_bucket_it_uses(tf: Config, bucket: str) -> None:
    """storage.buckets.get came with Dataproc Worker project-wide; the Cloud Storage connector
    reads a bucket's metadata (a path at its root, directory checks), so it is granted per bucket."""
    batch = "${google_service_account.batch.member}"
    assert any(
        holds(role_permissions(tf, grant["role"]), "storage.buckets.get") and not grant.get("condition")
        for grant in bucket_grants(tf, batch, bucket)
    ), f"the batches need storage.buckets.get on the {bucket} bucket"
