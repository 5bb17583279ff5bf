"""docs/DEPLOY-AWS.md lists an alarm for every event the library logs that needs a human."""

from __future__ import annotations

from tests.log_events import ROOT, WARNING_EVENTS_ALERTED, errors_to_alert

GOOGLE_ONLY = {
    "sweep_refused",  # logged by functions/main.py's HTTP sweeper; on AWS a failed run alarms
}


def alarm_rows() -> list[str]:
    text = (ROOT / "docs" / "DEPLOY-AWS.md").read_text()
    section = text.split("## Alarms\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| `")]


def test_every_event_that_needs_a_human_has_an_aws_alarm() -> None:
    listed = {row.split("`")[1] for row in alarm_rows()}
    assert "rejected" in listed and "settings_invalid" in listed
    missing = sorted((errors_to_alert() | WARNING_EVENTS_ALERTED) - GOOGLE_ONLY - listed)
    assert not missing, f"docs/DEPLOY-AWS.md, ## Alarms lacks {missing}"
