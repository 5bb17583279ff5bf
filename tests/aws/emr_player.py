"""EMR Serverless's part for the job runs moto records: moto accepts StartJobRun but runs nothing
(every run starts in SUCCESS). The player runs each new run of an application for real, on this
machine: its entry point fetched from S3, started with its entry point arguments as a spark-submit
of its own (`LocalRunner.launch`), and the run's state in moto moved as EMR moves it: RUNNING while
the application runs, then SUCCESS or FAILED with its exit. A cancelled run ends its application.

What it does not play: the run's `sparkSubmitParameters` (EMR's Iceberg runtime, Glue and S3FileIO:
the local Spark configuration stands in, with a Hadoop catalog on a local warehouse) and EMRFS
(Spark here cannot read s3://: `--stage-to` makes the job copy its batch's files first, as the
Dataproc emulator's jobs do)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.aws.moto_emr import service_runs
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.port import JobState
from turnstile.names.uris import parse_bucket_uri


class EmrPlayer:
    def __init__(self, application_id: str, s3_client: Any, local: LocalRunner) -> None:
        self.application_id = application_id
        self._s3 = s3_client
        self._local = local
        self._started: dict[str, str] = {}  # run id -> the name it was launched under

    def step(self) -> None:
        """Start the runs submitted since the last step; report those whose application ended."""
        for run in service_runs(self.application_id):
            if run.id not in self._started:
                self._start(run)
            elif run.state in {"CANCELLING", "CANCELLED"}:
                self._local.cancel(self._started[run.id])
                run.state = "CANCELLED"
            elif run.state == "RUNNING":
                status = self._local.status(self._started[run.id])
                if status is not None and status.state.finished:
                    run.state = "SUCCESS" if status.state is JobState.SUCCEEDED else "FAILED"
                    run.state_details = status.detail

    def launched(self) -> list[str]:
        return sorted(self._started.values())

    def _start(self, run: Any) -> None:
        submit = run.job_driver["sparkSubmit"]
        where = parse_bucket_uri(submit["entryPoint"])
        main = self._local.home / "emr-runs" / run.id / Path(where.path).name
        main.parent.mkdir(parents=True, exist_ok=True)
        main.write_bytes(self._s3.get_object(Bucket=where.bucket, Key=where.path)["Body"].read())
        arguments = [*submit.get("entryPointArguments", []), "--stage-to", str(main.parent / "staged")]
        self._started[run.id] = run.name
        run.state = "RUNNING"
        self._local.launch(run.name, str(main), arguments, run.tags or {})
