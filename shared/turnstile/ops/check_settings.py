"""Check the functions' environment before it is deployed: every problem the functions would meet at
cold start (`Settings.from_env`) and what the configured runner needs to build its first job, each
with the variable at fault and the fix. A function that finds a bad setting acknowledges events
without acting (alert `settings_invalid`); this finds it before `terraform apply` instead.

The environment comes from this process or from a file: KEY=VALUE lines (a shell `.env`, `export`
allowed) or one JSON object (Terraform's rendered `environment_variables`).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.jobs.dataproc import DataprocBatchSpec
from turnstile.jobs.emr import EmrJobSpec, emr_catalog_properties
from turnstile.names import legacy
from turnstile.ops.errors import Refused

SAMPLE_MANIFEST = "gs://bucket/ds/tbl/_jobs/check-settings.manifest.json"
"""A manifest URI to build one batch with, as the runner does for every job."""

# Dataproc's rules for labels (the API refuses a batch whose labels break them).
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
# Where Dataproc can fetch what a batch runs: Cloud Storage, or a file in the runtime's image.
STAGED_URI = re.compile(r"(gs://[^/\s]+/\S+|file:///\S+)")


@dataclass(frozen=True)
class Problem:
    variable: str
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.variable}: {self.problem}; fix: {self.fix}"


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of `path`: one JSON object, or KEY=VALUE lines (blank lines and `#` comments
    skipped, `export ` and shell quoting allowed). Refused, naming the line, when it is neither."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise Refused(
            f"cannot read the environment file {path}: {exc.strerror or exc}; pass an existing file"
        ) from exc
    if text.strip() == "null":  # `terraform show -json` of a plan whose environment is not known yet
        raise Refused(
            f"{path}: the plan holds no environment (JSON null: its values are unknown until apply, "
            "e.g. a service account created by the same apply); check a plan whose environment is "
            "known, or after apply: terraform output -json function_environment"
        )
    if text.lstrip().startswith("{"):
        return _json_env(path, text)
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.removeprefix("export ").partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise Refused(
                f"{path}:{number}: {line!r} is not KEY=VALUE; write one variable a line, e.g. LOG_LEVEL=INFO"
            )
        try:
            parts = shlex.split(value, comments=False) if value.strip() else [""]
        except ValueError as exc:
            raise Refused(
                f"{path}:{number}: the value of {key} does not parse ({exc}); close its quotes"
            ) from exc
        found[key] = " ".join(parts)
    return found


def _json_env(path: Path, text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Refused(
            f"{path}: not valid JSON ({exc}); write one JSON object of strings, or KEY=VALUE lines"
        ) from exc
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise Refused(f'{path}: the JSON is not an object of string values; write {{"NAME": "value", ...}}')
    return {str(k): v for k, v in data.items()}


def check(environ: Mapping[str, str], *, unknown_are_problems: bool) -> list[Problem]:
    """Every problem of `environ` as the deployed functions' environment. `unknown_are_problems`:
    a name that is no setting is reported (a file holds only settings; a process's environment holds
    much else)."""
    docs = Settings.variables()
    problems: list[Problem] = []
    # A bad value hides the checks that need valid settings (across variables, the runner's): each
    # round sets the variables at fault aside, so one run reports every problem.
    rest = dict(environ)
    seen: set[tuple[str, str]] = set()
    for _ in range(len(docs)):
        found = Settings.problems(rest)
        problems += [Problem(var, what, _fix(var, docs)) for var, what in found if (var, what) not in seen]
        seen |= set(found)
        if not found:
            settings = Settings.from_env(rest)
            aside = set(environ) - set(rest)  # reported already
            if settings.job_runner == "dataproc":
                problems += [p for p in dataproc_problems(settings) if p.variable not in aside]
            if settings.job_runner == "emr":
                problems += [p for p in emr_problems(settings) if p.variable not in aside]
            if settings.job_runner == "local":
                problems += _local_on_aws(settings, rest)
            break
        # The variables named, by the problem or in its text (a rule across variables names both).
        at_fault = {name for name in rest if any(name == var or name in what for var, what in found)}
        if not at_fault:
            break  # nothing left to set aside: the rest needs these fixed first
        rest = {name: value for name, value in rest.items() if name not in at_fault}
    if unknown_are_problems:
        problems += [_unknown(name, docs) for name in sorted(environ) if name not in docs]
    return problems


def _fix(variable: str, docs: Mapping[str, str]) -> str:
    doc = " ".join(docs.get(variable, "").split())
    return (
        f"set {variable} as documented: {doc} (docs/CONFIGURATION.md)" if doc else "see docs/CONFIGURATION.md"
    )


def _unknown(name: str, docs: Mapping[str, str]) -> Problem:
    if name in legacy.ENVIRONMENT:
        return Problem(
            name,
            "is gcs_ocn_bq_ingest's, not a turnstile setting, so it is ignored",
            legacy.ENVIRONMENT[name],
        )
    close = difflib.get_close_matches(name, list(docs), n=1)
    hint = (
        f"did you mean {close[0]}? rename it" if close else "remove it or use a name of docs/CONFIGURATION.md"
    )
    return Problem(name, "is not a turnstile setting, so it is ignored", hint)


def dataproc_problems(settings: Settings) -> list[Problem]:
    """What the Dataproc runner needs beyond valid settings: the project, a batch it can build, and
    values the Dataproc API accepts."""
    problems = []
    if not settings.gcp_project:
        problems.append(
            Problem(
                "GOOGLE_CLOUD_PROJECT",
                "is not set; the Dataproc runner needs the project",
                "set it to the project the batches run in",
            )
        )
    try:
        DataprocBatchSpec.from_settings(settings).batch(SAMPLE_MANIFEST)
    except SettingsError as exc:
        problems.append(_refusal(exc, "terraform/main.tf renders it for the functions"))
    problems += _staged_uris(settings)
    problems += _driver_main(settings, "gs")
    problems += _labels(settings.dataproc_labels)
    if settings.iceberg_catalog_type == "hadoop":
        problems.append(
            Problem(
                "ICEBERG_CATALOG_TYPE",
                "is hadoop, whose commits need an atomic rename that Cloud Storage lacks",
                "set biglake or rest for the Dataproc runner (hadoop is for the local stack)",
            )
        )
    if settings.iceberg_warehouse and not settings.iceberg_warehouse.startswith("gs://"):
        problems.append(
            Problem(
                "ICEBERG_WAREHOUSE",
                f"is {settings.iceberg_warehouse!r}, not in Cloud Storage; a Dataproc batch cannot reach it",
                "set gs://BUCKET[/PATH]",
            )
        )
    if settings.dataproc_service_account and "@" not in settings.dataproc_service_account:
        problems.append(
            Problem(
                "DATAPROC_SERVICE_ACCOUNT",
                f"{settings.dataproc_service_account!r} is no service account email",
                "set NAME@PROJECT.iam.gserviceaccount.com",
            )
        )
    return problems


def _refusal(exc: SettingsError, where: str) -> Problem:
    """A runner's refusal to build, charged to the first variable its message names."""
    message = str(exc)
    named = [name for name in Settings.variables() if name in message]
    variable = min(named, key=lambda name: (message.index(name), -len(name))) if named else "JOB_RUNNER"
    return Problem(variable, message, f"set {variable} ({where})")


def emr_problems(settings: Settings) -> list[Problem]:
    """What the EMR runner needs beyond valid settings: the job spec it builds (the application and
    role, an s3:// main file, an AWS catalog) and S3 locations, each reported. AWS_REGION is not
    required: Lambda sets it itself."""
    where = "docs/DEPLOY-AWS.md lists the Lambda's environment"
    problems = []
    for build in (EmrJobSpec.from_settings, emr_catalog_properties):
        try:
            build(settings)
        except SettingsError as exc:
            problems.append(_refusal(exc, where))
    main = settings.job_main_uri or ""
    if main.startswith("s3://") and not main.endswith(".py"):
        problems.append(
            Problem("JOB_MAIN_URI", f"{main!r} is not a .py file; EMR runs a PySpark main file", where)
        )
    elif main and not main.startswith("s3://") and all(p.variable != "JOB_MAIN_URI" for p in problems):
        problems.append(
            Problem(
                "JOB_MAIN_URI", f"{main!r} is not in S3; EMR Serverless runs a main file staged there", where
            )
        )
    problems += _driver_main(settings, "s3")
    if settings.iceberg_warehouse and not settings.iceberg_warehouse.startswith("s3://"):
        problems.append(
            Problem(
                "ICEBERG_WAREHOUSE",
                f"is {settings.iceberg_warehouse!r}, not in S3; Iceberg's S3FileIO on EMR writes to S3",
                "set s3://BUCKET[/PATH]",
            )
        )
    return problems


AWS_NAMES = re.compile(r"AWS_REGION|EMR_\w+")


def _local_on_aws(settings: Settings, environ: Mapping[str, str]) -> list[Problem]:
    """The local runner (JOB_RUNNER's default) in an environment meant for AWS: JOB_RUNNER forgotten.
    An S3 endpoint override (moto, MinIO) may run jobs locally."""
    named = sorted(
        name
        for name, value in environ.items()
        if name in Settings.variables() and (AWS_NAMES.fullmatch(name) or value.startswith("s3://"))
    )
    if settings.aws_endpoint_url or not named:
        return []
    return [
        Problem(
            "JOB_RUNNER",
            f"is local (its default) but the environment is AWS's ({', '.join(named)}); the Lambda refuses "
            "the local runner on S3 and acknowledges every event without action",
            "set JOB_RUNNER=emr and the EMR_* settings (docs/DEPLOY-AWS.md)",
        )
    ]


def _staged_uris(settings: Settings) -> list[Problem]:
    staged = {
        "JOB_MAIN_URI": (settings.job_main_uri,) if settings.job_main_uri else (),
        "JOB_PYTHON_FILE_URIS": settings.job_python_file_uris,
        "JOB_JAR_URIS": settings.job_jar_uris,
        "JOB_ARCHIVE_URIS": tuple(uri.partition("#")[0] for uri in settings.job_archive_uris),
    }
    problems = []
    for variable, uris in staged.items():
        for uri in uris:
            if not STAGED_URI.fullmatch(uri):
                problems.append(
                    Problem(
                        variable,
                        f"{uri!r} is not a gs:// (or file:///) URI a batch can fetch",
                        "stage it with make package and terraform apply, and name its gs:// URI",
                    )
                )
    main = settings.job_main_uri or ""
    if main and STAGED_URI.fullmatch(main) and not main.endswith(".py"):
        problems.append(
            Problem(
                "JOB_MAIN_URI",
                f"{main!r} is not a .py file; Dataproc runs a PySpark main file",
                "name the staged job main file (gs://ARTIFACTS/job/VERSION/main.py)",
            )
        )
    return problems


def _driver_main(settings: Settings, scheme: str) -> list[Problem]:
    """DRIVER=warm: the warm driver's staged main file (`job/driver.py`), in `scheme`'s storage."""
    main = settings.driver_main_uri
    if settings.driver != "warm":
        return []
    fix = f"name the staged driver main file ({scheme}://ARTIFACTS/.../driver.py), or set DRIVER=per_job"
    if not main:
        return [
            Problem("DRIVER_MAIN_URI", "DRIVER_MAIN_URI is not set; DRIVER=warm starts driver batches", fix)
        ]
    fetchable = STAGED_URI.fullmatch(main) if scheme == "gs" else main.startswith("s3://")
    if not fetchable or not main.endswith(".py"):
        problem = f"{main!r} is not a .py file in {scheme}:// a driver can run"
        return [Problem("DRIVER_MAIN_URI", problem, fix)]
    return []


def _labels(labels: Mapping[str, str]) -> list[Problem]:
    problems = []
    for key, value in labels.items():
        if not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            problems.append(
                Problem(
                    "DATAPROC_LABELS",
                    f"label {key}={value!r} breaks Dataproc's rules (keys: a lowercase letter, then up to 62 "
                    "of [a-z0-9_-]; values: up to 63 of [a-z0-9_-]); the API refuses every batch",
                    "fix the label (in Terraform: var.labels)",
                )
            )
    return problems
