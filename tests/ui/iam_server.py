"""A moto server of its own that enforces IAM, as AWS does: every S3 request is signed by an IAM user
created through moto's IAM API and allowed only what that user's policy allows.

A process apart, because moto keeps its authentication switch in module state
(`moto.settings.INITIAL_NO_AUTH_ACTION_COUNT`): switched on in this process, it would apply to the
session's shared moto server (`tests/conftest.py`) too. The users and the bucket are made before
authentication is switched on (`/moto-api/reset-auth`, as moto's `set_initial_no_auth_action_count`
does for a server); from then on every request needs an IAM user's credentials."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import requests

from turnstile.local import emulator as emu

REGION = "eu-west-1"


@dataclass(frozen=True)
class User:
    name: str
    access_key_id: str
    secret_access_key: str

    @property
    def environment(self) -> dict[str, str]:
        """The variables a process signs its requests with as this user (AWS's usual chain)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}

    def client(self, service: str, endpoint: str) -> Any:
        return boto3.session.Session(
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=REGION,
        ).client(service, endpoint_url=endpoint)


class IamMotoServer:
    """`python -m moto.server` on a free loopback port, its output in `log`."""

    def __init__(self, log: Path) -> None:
        self.port = emu.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out = log.open("wb")
        environment = {k: v for k, v in os.environ.items() if k != "INITIAL_NO_AUTH_ACTION_COUNT"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            start_new_session=True,
        )
        self._wait_until_up()

    def _wait_until_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                requests.get(f"{self.url}/moto-api/", timeout=2)
                return
            except requests.ConnectionError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the moto server did not start:\n{self.log.read_text(errors='replace')}")

    def create_user(self, name: str, *, actions: list[str], bucket: str) -> User:
        """An IAM user whose only policy allows `actions` on `bucket` and its objects."""
        iam = self._unauthenticated("iam")
        iam.create_user(UserName=name)
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": actions,
                    "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                }
            ],
        }
        iam.put_user_policy(UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return User(name, key["AccessKeyId"], key["SecretAccessKey"])

    def create_bucket(self, bucket: str) -> None:
        s3 = self._unauthenticated("s3")
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})

    def enforce(self) -> None:
        """From now on every request is authenticated and checked against its user's policies."""
        answer = requests.post(f"{self.url}/moto-api/reset-auth", data=b"0", timeout=10)
        answer.raise_for_status()

    def _unauthenticated(self, service: str) -> Any:
        """A client for the set-up, before `enforce` (any credentials will do then)."""
        return User("set-up", "testing", "testing").client(service, self.url)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._out.close()
