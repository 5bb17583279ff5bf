# Log-based metrics and alerts. The library writes JSON log lines that Cloud Logging parses into
# jsonPayload (turnstile.core.logs); the fields used here are set by turnstile.protocol, turnstile.entrypoints.entry
# and functions/main.py:
#
# - table_blocked (ERROR, fields table, bucket, job_id, rel, error, lock_age_seconds): logged by the
#   subscriber when a batch fails and by the sweeper on every sweep while the lock stays FAILED, so
#   the count stays above zero until someone runs `turnstile unlock`, and the incident closes after.
#
# - Backlog that stops draining: the sweeper logs subscriber_restarted (WARNING, field table) each
#   time it finds a table with pointers but no live subscriber run, or a RUNNING lock whose job ended
#   unnoticed, and writes a new _BACKFILL. One restart is the designed repair of a lost event or a
#   crashed invocation. A restart cannot recur for one table before the previous run's lease (the
#   function timeout) has passed, so several restarts of the same table within an hour mean each
#   restarted run failed to move it: the backlog is stuck (failing invocations, a job service that
#   refuses, a bug). A count per table over a window is that signal; it needs no listing of the
#   bucket and it ignores a backlog that is long but moving. table_still_blocked is not used: it
#   repeats what table_blocked already says.
#   The sweeper itself failing is the other way a backlog silently stops draining, so the same
#   policy also fires when the scheduler's calls to the sweeper fail repeatedly.
#
# Every other failure kind the library logs has a metric below and an alert (docs/DEPLOY.md, "Alerts",
# has the table of them; tests/terraform checks that every event logged at ERROR or CRITICAL has both):
#
# - watermark_gap (ERROR, table, bucket, missing_period, missing_seconds, dependents): logged by the
#   sweeper on every sweep while a table's oldest missing period (its gap-aware watermark waits for it,
#   later periods are committed) has been missing longer than its max_gap_wait; it stops once the
#   period lands, its batch is skipped, or `turnstile mark-missing` declares it.
# - derived_step_stale (ERROR, table, bucket, rel, source, source_rel, command): logged by the
#   subscriber that finishes a source's job when the period it committed was already read by a built
#   step of an `append` derived table, which a rebuild would append twice; the step is recorded STALE
#   (`turnstile status` lists it) until an operator deletes its rows and reprocesses it. Once per
#   source change and step: any is an incident.
# - driver_launch_failed (ERROR, batch, error): with DRIVER=warm, Dataproc refused a warm driver's
#   batch (quota, permission, image). No warm job runs until a driver starts: any is an incident.
# - batch_failed (ERROR, table): an unordered batch failed for a terminal reason; it waits for
#   `turnstile retry`. One line per failure: any is an incident.
# - settings_invalid (CRITICAL): an environment variable of the functions is invalid; logged once per
#   function instance while events are acknowledged without action. Any is an incident.
# - rejected (ERROR): an event was dropped because retrying cannot help (a bad batch path or config,
#   storage refusing the functions). The batch is applied only once someone fixes it and re-uploads.
# - job_timed_out (ERROR, table): the sweeper's watchdog cancelled a job past job_timeout_seconds; it
#   is retried, so one is no incident; several for one table within an hour are.
# - job_retry_scheduled (WARNING, table): a transient job failure, retried with backoff. Retries
#   that keep happening for one table (more than retry_alert_threshold an hour) need a human.
# - batch_reconciled (WARNING, table): the sweeper published a batch whose event never came. A few
#   are the designed repair; more than reconciled_alert_threshold an hour mean the notifications are
#   broken (trigger deleted, functions failing before they log).
# - sweep_table_failed (ERROR, table) and sweep_refused (ERROR): one table, or a whole bucket, could
#   not be swept; they join the sweeper's failed calls in "backlog not draining".
# - snapshot_expiry_failed (ERROR, table, bucket, iceberg_table, job_id, error): logged by the Spark
#   job (turnstile.spark.run), not by the functions, when Iceberg's expire_snapshots fails on a
#   table it committed to. Its batches are committed and recorded; the next job that commits to the
#   table tries again, but while expiry keeps failing the table's snapshots and files pile up. The
#   job writes the line on the driver's stderr, which Dataproc Serverless keeps as the batch's output
#   (resource cloud_dataproc_batch). That output reaches Cloud Logging as `jsonPayload.message`
#   unless the JSON line is parsed into fields, so the metric matches either form, scoped to this
#   deployment by the bucket the message names, and reads the table from the message's fixed
#   beginning, "snapshot expiry of gs://BUCKET/TABLE failed: " (turnstile.spark.hygiene.failure_message).
# - expectation_rows_failed (WARNING, table, bucket, rel, expectation, on_fail, failed_rows): logged by the
#   Spark job (turnstile.spark.expectations) once per expectation of load.json that rows of a batch
#   failed (warned, dropped, or failed the batch, which table_blocked or batch_failed then reports).
#   A data-quality signal, not an incident: a metric and a dashboard chart, no alert. Like
#   snapshot_expiry_failed it sits in the Dataproc batch's output, parsed into fields or not, so the
#   metric matches either form and reads its labels from the message's fixed shape,
#   "expectation_rows_failed: expectation NAME of gs://BUCKET/TABLE: N row(s) failed, on_fail ACTION"
#   (turnstile.spark.expectations.message).
#
# Backlog metrics and the dashboard: at every sweep the sweeper logs one table_backlog line (INFO) per
# table with pending, oldest_pending_age_seconds and last_commit_lag_seconds (turnstile.protocol.sweeper,
# BacklogMetrics). Each field feeds a distribution metric labelled by table; log-based metrics are
# DELTA, so a chart or an alert reads a gauge from them with a percentile aligner over a window that
# holds a sweep or two. The oldest pending batch older than backlog_age_alert_seconds is an alert;
# the others are charts only. Commits are counted from the subscriber's "job applied" line (ordered
# tables; an unordered batch's success is in its result record, `turnstile history`, not the logs).

locals {
  sweeper_logs = "(resource.labels.service_name=\"${google_cloudfunctions2_function.sweeper.name}\" OR resource.labels.function_name=\"${google_cloudfunctions2_function.sweeper.name}\")"
  function_logs = join(" OR ", [
    for name in [google_cloudfunctions2_function.events.name, google_cloudfunctions2_function.sweeper.name] :
    "resource.labels.service_name=\"${name}\" OR resource.labels.function_name=\"${name}\""
  ])
}

resource "google_logging_metric" "table_blocked" {
  project     = var.project_id
  name        = "${var.name}/table_blocked"
  description = "turnstile: a table of gs://${google_storage_bucket.inbound.name} is blocked by a FAILED lock (logged at failure and on every sweep)."
  filter      = "jsonPayload.event=\"table_blocked\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile blocked table reports (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "subscriber_restarted" {
  project     = var.project_id
  name        = "${var.name}/subscriber_restarted"
  description = "turnstile: the sweeper restarted the subscriber of a table that had work and no live run."
  filter      = "jsonPayload.event=\"subscriber_restarted\" AND ${local.sweeper_logs}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile subscriber restarts (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "sweep_failed" {
  project     = var.project_id
  name        = "${var.name}/sweep_failed"
  description = "turnstile: a scheduled call of the sweeper failed."
  filter      = "resource.type=\"cloud_scheduler_job\" AND resource.labels.job_id=\"${google_cloud_scheduler_job.sweep.name}\" AND severity>=ERROR"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile failed sweeps (${var.name})"
  }
}

resource "google_logging_metric" "batch_failed" {
  project     = var.project_id
  name        = "${var.name}/batch_failed"
  description = "turnstile: an unordered batch failed for a terminal reason and waits for turnstile retry."
  filter      = "jsonPayload.event=\"batch_failed\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile failed unordered batches (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "settings_invalid" {
  project     = var.project_id
  name        = "${var.name}/settings_invalid"
  description = "turnstile: a function instance found an invalid setting in its environment (events are acknowledged without action)."
  filter      = "jsonPayload.event=\"settings_invalid\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile invalid settings reports (${var.name})"
  }
}

resource "google_logging_metric" "rejected" {
  project     = var.project_id
  name        = "${var.name}/rejected"
  description = "turnstile: an event was dropped because retrying cannot help (bad batch path or config, storage refusing the functions)."
  filter      = "jsonPayload.event=\"rejected\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile rejected events (${var.name})"
  }
}

resource "google_logging_metric" "job_timed_out" {
  project     = var.project_id
  name        = "${var.name}/job_timed_out"
  description = "turnstile: the sweeper's watchdog cancelled a job that ran past job_timeout_seconds."
  filter      = "jsonPayload.event=\"job_timed_out\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile timed-out jobs (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "job_retry_scheduled" {
  project     = var.project_id
  name        = "${var.name}/job_retry_scheduled"
  description = "turnstile: a job failed for a transient reason and its batch is retried."
  filter      = "jsonPayload.event=\"job_retry_scheduled\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile job retries (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "batch_reconciled" {
  project     = var.project_id
  name        = "${var.name}/batch_reconciled"
  description = "turnstile: the sweeper published a batch whose object event never came."
  filter      = "jsonPayload.event=\"batch_reconciled\" AND ${local.sweeper_logs}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile batches reconciled by the sweeper (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "sweep_table_failed" {
  project     = var.project_id
  name        = "${var.name}/sweep_table_failed"
  description = "turnstile: the sweeper could not sweep one table."
  filter      = "jsonPayload.event=\"sweep_table_failed\" AND ${local.sweeper_logs}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile tables the sweeper could not sweep (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_logging_metric" "sweep_refused" {
  project     = var.project_id
  name        = "${var.name}/sweep_refused"
  description = "turnstile: the sweeper could not read a bucket for a reason retrying cannot fix."
  filter      = "jsonPayload.event=\"sweep_refused\" AND ${local.sweeper_logs}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile refused sweeps (${var.name})"
  }
}

resource "google_logging_metric" "snapshot_expiry_failed" {
  project     = var.project_id
  name        = "${var.name}/snapshot_expiry_failed"
  description = "turnstile: a job could not expire the old snapshots of a table it committed to (its batches are applied)."
  filter      = "resource.type=\"cloud_dataproc_batch\" AND (jsonPayload.event=\"snapshot_expiry_failed\" OR jsonPayload.message:\"snapshot_expiry_failed\") AND jsonPayload.message:\"snapshot expiry of gs://${google_storage_bucket.inbound.name}/\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile failed snapshot expiries (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "REGEXP_EXTRACT(jsonPayload.message, \"snapshot expiry of gs://[^/]+/([^ ]+) failed: \")"
  }
}

resource "google_logging_metric" "expectation_rows_failed" {
  project     = var.project_id
  name        = "${var.name}/expectation_rows_failed"
  description = "turnstile: rows of a batch failed one of its table's expectations (one count per batch and expectation)."
  filter      = "resource.type=\"cloud_dataproc_batch\" AND (jsonPayload.event=\"expectation_rows_failed\" OR jsonPayload.message:\"expectation_rows_failed\") AND jsonPayload.message:\" of gs://${google_storage_bucket.inbound.name}/\""

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile batches with rows failing an expectation (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
    labels {
      key         = "expectation"
      value_type  = "STRING"
      description = "the expectation's name in load.json"
    }
    labels {
      key         = "on_fail"
      value_type  = "STRING"
      description = "warn, drop or fail"
    }
  }

  label_extractors = {
    table       = "REGEXP_EXTRACT(jsonPayload.message, \"expectation_rows_failed: expectation [^ ]+ of gs://[^/]+/([^ ]+): \")"
    expectation = "REGEXP_EXTRACT(jsonPayload.message, \"expectation_rows_failed: expectation ([^ ]+) of \")"
    on_fail     = "REGEXP_EXTRACT(jsonPayload.message, \" failed, on_fail ([a-z]+)\")"
  }
}

resource "google_monitoring_alert_policy" "table_blocked" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: table blocked"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a table has a FAILED lock"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.table_blocked.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # Two sweeps fit in the window, so a blocked table keeps its incident open between reports.
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` is blocked: one of its
      batches failed and nothing more is applied to it until an operator acts.

      1. See why: `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}`
         (and the Dataproc batch named there: `gcloud dataproc batches describe JOB_ID --region ${local.dataproc_region}`).
      2. Fix the cause (the batch's files, its `_config/load.json`, the table).
      3. Unlock: `${local.operator_env_prefix} turnstile unlock gs://${google_storage_bucket.inbound.name}/$${metric.label.table}`
         retries the failed batch; add `--skip-head` if it was applied or repaired by hand.
    EOT
  }
}

resource "google_logging_metric" "watermark_gap" {
  project     = var.project_id
  name        = "${var.name}/watermark_gap"
  description = "turnstile: a period of a table of gs://${google_storage_bucket.inbound.name} has been missing longer than max_gap_wait while later ones are committed (logged at every sweep)."
  filter      = "jsonPayload.event=\"watermark_gap\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\" AND ${local.sweeper_logs}"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile missing period reports (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_monitoring_alert_policy" "watermark_gap" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: period missing"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a table's watermark waits for a missing period past max_gap_wait"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.watermark_gap.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # Two sweeps fit in the window, so a gap keeps its incident open between reports.
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "1800s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` has a period with no
      batch while later ones are committed, for longer than its `max_gap_wait`: its watermark stops there,
      and the tables that depend on it do not build past it.

      1. See which period and whom it holds: `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}`
      2. Let the period's batch land (upstream), drop its batch with `turnstile skip`, or declare it empty:
         `${local.operator_env_prefix} turnstile mark-missing gs://${google_storage_bucket.inbound.name}/$${metric.label.table} PERIOD`.
      3. A source that legitimately skips periods: set `"gaps": "ignore"` in its `_config/load.json`.
    EOT
  }
}

resource "google_monitoring_alert_policy" "backlog_stalled" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: backlog not draining"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "the sweeper keeps restarting one table's subscriber"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.subscriber_restarted.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = var.stall_restart_threshold
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "${var.stall_window_seconds}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "the sweeper is failing"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.sweep_failed.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 2
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # More than two failed calls in half an hour: at the default 5-minute schedule, the sweeper has
      # not run for a quarter of an hour.
      aggregations {
        alignment_period     = "1800s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "the sweeper keeps failing on one table"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.sweep_table_failed.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 2
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # Same window as the failed calls: a quarter of an hour of sweeps that skip the table.
      aggregations {
        alignment_period     = "1800s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  conditions {
    display_name = "the sweeper is refused access to the bucket"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.sweep_refused.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # Retrying cannot fix a refusal: the first one is an incident.
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A backlog of `gs://${google_storage_bucket.inbound.name}` is not draining: the sweeper keeps
      restarting the subscriber of table `$${metric.label.table}` and every run fails to move it, the
      sweeper keeps failing on that table (`sweep_table_failed`), or the sweeper itself keeps failing or
      is refused access to the bucket (`sweep_refused`: grant the functions' account access, terraform/iam.tf).

      1. `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}` shows each table's lock,
         backlog and subscriber.
      2. Errors of the functions: Logs Explorer, `jsonPayload.table="$${metric.label.table}" severity>=WARNING`
         for the services `${google_cloudfunctions2_function.events.name}` and `${google_cloudfunctions2_function.sweeper.name}`.
      3. Failed calls of the sweeper: the Cloud Scheduler job `${google_cloud_scheduler_job.sweep.name}` in ${local.scheduler_region}.
    EOT
  }
}

resource "google_monitoring_alert_policy" "batch_failed" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: batch failed"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "an unordered batch failed"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.batch_failed.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A batch of table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` failed for a reason retrying cannot fix; it is
      recorded as failed in the bucket and is not applied until an operator acts. The table's other
      batches go on.

      1. See why: `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}` lists the failed batch with its error.
      2. Fix the cause (the batch's files, its `_config/load.json` or `transform.sql`, the table).
      3. Apply it on Dataproc, with the deployment's job settings (terraform output operator_job_env_prefix; needs the operator grants of docs/DEPLOY.md): `${local.operator_job_env_prefix} turnstile retry gs://${google_storage_bucket.inbound.name}/$${metric.label.table}/BATCH`.
    EOT
  }
}

resource "google_logging_metric" "derived_step_stale" {
  project     = var.project_id
  name        = "${var.name}/derived_step_stale"
  description = "turnstile: a source of an append derived table of gs://${google_storage_bucket.inbound.name} changed after a step read it; the step is STALE."
  filter      = "jsonPayload.event=\"derived_step_stale\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile stale derived steps (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_monitoring_alert_policy" "derived_step_stale" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: derived step stale"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a step of an append derived table was built before its source changed"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.derived_step_stale.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A source of the derived table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` committed a period
      (a late batch let through, a reprocess, a re-upload) after a step of the table had been built from it. The
      table's mode is `append`, so turnstile cannot replace the step's rows: the step is recorded STALE.

      1. `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}` lists the stale steps, each with its cause and command.
      2. Delete the step's rows from the Iceberg table (its window on the table's time column).
      3. Rebuild it: `${local.operator_env_prefix} turnstile reprocess gs://${google_storage_bucket.inbound.name}/$${metric.label.table}/STEP`; the STALE record is cleared when it commits.
      4. To have turnstile replace steps itself, use `mode: replace_window` (or `overwrite_partitions`, `merge`) for the table.
    EOT
  }
}

resource "google_logging_metric" "driver_launch_failed" {
  project     = var.project_id
  name        = "${var.name}/driver_launch_failed"
  description = "turnstile: a warm driver's Dataproc batch could not be created (quota, permission, image): no warm job runs meanwhile."
  filter      = "jsonPayload.event=\"driver_launch_failed\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile warm driver launches refused (${var.name})"
  }
}

resource "google_monitoring_alert_policy" "driver_launch_failed" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: warm driver cannot start"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a warm driver batch could not be created"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.driver_launch_failed.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Dataproc refused the batch of a warm driver of `gs://${google_storage_bucket.inbound.name}`: the log line (`jsonPayload.event="driver_launch_failed"`)
      has the batch id and Dataproc's error. Until a driver starts, no job of the deployment runs: each submit that needs a
      driver fails as a refused submit does (a transient refusal, such as a quota, is retried with backoff; others block
      the table or fail the batch), and the next submit launches again.

      1. Read the error: a quota (`RESOURCE_EXHAUSTED`: raise the Dataproc Serverless quota or lower the driver's size),
         a permission (`PERMISSION_DENIED`: the functions' account must act as the batch account), an image or file
         missing (`DRIVER_MAIN_URI`, the runtime version).
      2. Fix it, then `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}` shows the
         tables it held and the warm drivers; the sweeper retries transient failures, `turnstile unlock` or `retry` the others.
    EOT
  }
}

resource "google_monitoring_alert_policy" "settings_invalid" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: invalid settings"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a function found an invalid setting"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.settings_invalid.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A function of `gs://${google_storage_bucket.inbound.name}` cannot read its settings: the log line (`jsonPayload.event="settings_invalid"`)
      names the environment variable and what is wrong. Events are acknowledged without action meanwhile.

      1. Fix the variable in the Terraform inputs; check them with `turnstile check-settings --env-file FILE`.
      2. `terraform apply`; the sweeper's reconciliation then publishes every batch that arrived meanwhile.
    EOT
  }
}

resource "google_monitoring_alert_policy" "rejected" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: event rejected"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "an event was dropped because retrying cannot help"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.rejected.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      An object event of `gs://${google_storage_bucket.inbound.name}` was rejected: the log line (`jsonPayload.event="rejected"`) names the object
      and what is wrong (a batch path that does not fit the layout, an invalid `_config/load.json`, storage
      refusing the functions' account). The batch is not applied.

      1. Fix what the message says (the path, the config, the grant in terraform/iam.tf).
      2. Upload the batch's `_SUCCESS` again, or `${local.operator_job_env_prefix} turnstile backfill gs://${google_storage_bucket.inbound.name}/FOLDER`.
    EOT
  }
}

resource "google_monitoring_alert_policy" "job_timed_out" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: jobs keep timing out"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "jobs of one table keep running past job_timeout_seconds"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.job_timed_out.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = var.timeout_alert_threshold
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      The watchdog cancelled more than ${var.timeout_alert_threshold} jobs of table `$${metric.label.table}` of
      `gs://${google_storage_bucket.inbound.name}` within an hour: they ran past `job_timeout_seconds`. Each is retried, but they keep timing out.

      1. `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}` names the jobs; `gcloud dataproc batches describe JOB_ID --region ${local.dataproc_region}` shows where they spent their time.
      2. Raise `job_timeout_seconds` in the table's `_config/load.json` if its batches are simply large, or fix what makes them hang.
    EOT
  }
}

resource "google_monitoring_alert_policy" "job_retries" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: jobs keep failing transiently"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "one table's jobs keep being retried"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.job_retry_scheduled.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = var.retry_alert_threshold
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      Jobs of table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` failed for a transient reason more than
      ${var.retry_alert_threshold} times within an hour (quota, a service error, permissions still propagating). They are retried with
      backoff, but they keep failing.

      1. Logs Explorer: `jsonPayload.event="job_retry_scheduled" jsonPayload.table="$${metric.label.table}"`; the `error` field says why.
      2. Fix the cause (Dataproc quota in ${local.dataproc_region}, the batch account's grants); once the retries are exhausted, `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}` shows the batch and `turnstile retry` (unordered, with the job settings of terraform output operator_job_env_prefix) or `turnstile unlock` (ordered) applies it.
    EOT
  }
}

resource "google_monitoring_alert_policy" "events_lost" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: object events keep getting lost"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "the sweeper keeps publishing batches whose events never came"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.batch_reconciled.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = var.reconciled_alert_threshold
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      The sweeper published more than ${var.reconciled_alert_threshold} batches of `gs://${google_storage_bucket.inbound.name}` within an hour whose object event
      never reached the event function. Each was applied, but the notifications are not working.

      1. Check the Eventarc trigger of `${google_cloudfunctions2_function.events.name}` exists and is active, and that the
         function is not failing before it logs (Logs Explorer, severity>=ERROR).
      2. Batches keep being applied within one sweep meanwhile; nothing else to do once events flow again.
    EOT
  }
}

resource "google_monitoring_alert_policy" "snapshot_expiry_failed" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: snapshot expiry failed"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a job could not expire a table's old snapshots"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.snapshot_expiry_failed.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = 0
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      aggregations {
        alignment_period     = "3600s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "86400s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A job that committed to table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` could not expire its old
      snapshots. Its batches are applied and recorded; the next job that commits to the table tries again,
      but while expiry keeps failing the table's snapshots and data files are never removed.

      1. Logs Explorer: `resource.type="cloud_dataproc_batch" "snapshot_expiry_failed" "$${metric.label.table}"`; the line
         names the Iceberg table, the job and Spark's reason.
      2. Fix the cause. A table with `gc.enabled=false` (`table_properties` in its `_config/load.json`) refuses expiry:
         set `"snapshot_retention_days": null` there to switch turnstile's expiry off for it, or enable GC on the table if
         no other table shares its files. A grant the batch account lacks on the warehouse or the catalog: terraform/iam.tf.
      3. Nothing to re-run: the next job expires what is due. `turnstile status` is unaffected.
    EOT
  }
}

resource "google_logging_metric" "backlog_pending" {
  project         = var.project_id
  name            = "${var.name}/backlog_pending"
  description     = "turnstile: batches queued in a table's backlog at a sweep (counted up to 100)."
  filter          = "jsonPayload.event=\"table_backlog\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\" AND ${local.sweeper_logs}"
  value_extractor = "EXTRACT(jsonPayload.pending)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "1"
    display_name = "turnstile pending batches (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }

  # One bucket per count, centred on it: a percentile reads the count back within half a batch.
  bucket_options {
    linear_buckets {
      num_finite_buckets = 101
      width              = 1
      offset             = -0.5
    }
  }
}

resource "google_logging_metric" "backlog_oldest_pending_age" {
  project         = var.project_id
  name            = "${var.name}/backlog_oldest_pending_age"
  description     = "turnstile: seconds the oldest pending batch of a table has waited since it was queued, at a sweep."
  filter          = "jsonPayload.event=\"table_backlog\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\" AND ${local.sweeper_logs}"
  value_extractor = "EXTRACT(jsonPayload.oldest_pending_age_seconds)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "s"
    display_name = "turnstile oldest pending batch age (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }

  # Buckets 10% wide up to about 18 days: the alert fires within 10% of its threshold.
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 150
      growth_factor      = 1.1
      scale              = 1
    }
  }
}

resource "google_logging_metric" "last_commit_lag" {
  project         = var.project_id
  name            = "${var.name}/last_commit_lag"
  description     = "turnstile: seconds since the last job of a table released its lock after applying its batches, at a sweep."
  filter          = "jsonPayload.event=\"table_backlog\" AND jsonPayload.bucket=\"${google_storage_bucket.inbound.name}\" AND ${local.sweeper_logs}"
  value_extractor = "EXTRACT(jsonPayload.last_commit_lag_seconds)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "s"
    display_name = "turnstile last commit lag (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }

  bucket_options {
    exponential_buckets {
      num_finite_buckets = 150
      growth_factor      = 1.1
      scale              = 1
    }
  }
}

resource "google_logging_metric" "jobs_applied" {
  project     = var.project_id
  name        = "${var.name}/jobs_applied"
  description = "turnstile: jobs whose batches were committed to an ordered table (one per job; a job may cover several batches)."
  filter      = "jsonPayload.message=\"job applied\" AND jsonPayload.logger=\"turnstile.subscriber\" AND (${local.function_logs})"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "turnstile jobs applied (${var.name})"

    labels {
      key         = "table"
      value_type  = "STRING"
      description = "<dataset>/<table>"
    }
  }

  label_extractors = {
    table = "EXTRACT(jsonPayload.table)"
  }
}

resource "google_monitoring_alert_policy" "backlog_too_old" {
  project               = var.project_id
  display_name          = "turnstile ${var.name}: oldest pending batch too old"
  combiner              = "OR"
  notification_channels = var.notification_channels
  user_labels           = { app = "turnstile", deployment = var.name }

  conditions {
    display_name = "a table's oldest pending batch waited longer than ${var.backlog_age_alert_seconds}s"

    condition_threshold {
      filter                  = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.backlog_oldest_pending_age.name}\""
      comparison              = "COMPARISON_GT"
      threshold_value         = var.backlog_age_alert_seconds
      duration                = "0s"
      evaluation_missing_data = "EVALUATION_MISSING_DATA_INACTIVE"

      # Two sweeps fit in the window; the 99th percentile of so few values is their largest.
      aggregations {
        alignment_period     = "600s"
        per_series_aligner   = "ALIGN_PERCENTILE_99"
        cross_series_reducer = "REDUCE_MAX"
        group_by_fields      = ["metric.label.table"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      The oldest pending batch of table `$${metric.label.table}` of `gs://${google_storage_bucket.inbound.name}` has waited more than
      ${var.backlog_age_alert_seconds} seconds: the table is blocked, gated, waiting for validation, or its jobs are slower than its arrivals.

      1. `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}/$${metric.label.table}` shows its health (BLOCKED, GATED, PAUSED,
         STALLED, RUNNING), the backlog, the oldest pending age and the lag of the last commit.
      2. BLOCKED: fix the cause and `turnstile unlock`; GATED: upload the gate file; PAUSED: `turnstile resume`;
         RUNNING for long: the Dataproc batch named there; a backlog that just keeps growing: raise `max_batches_per_job`
         in the table's `_config/load.json` or the job's resources.
    EOT
  }
}

resource "google_monitoring_dashboard" "tables" {
  project = var.project_id
  dashboard_json = templatefile("${path.module}/dashboard.json.tftpl", {
    title                = "turnstile ${var.name}: tables of gs://${google_storage_bucket.inbound.name}"
    backlog_pending      = google_logging_metric.backlog_pending.name
    oldest_pending_age   = google_logging_metric.backlog_oldest_pending_age.name
    last_commit_lag      = google_logging_metric.last_commit_lag.name
    jobs_applied         = google_logging_metric.jobs_applied.name
    batch_failed         = google_logging_metric.batch_failed.name
    table_blocked        = google_logging_metric.table_blocked.name
    job_retry_scheduled  = google_logging_metric.job_retry_scheduled.name
    job_timed_out        = google_logging_metric.job_timed_out.name
    expiry_failed        = google_logging_metric.snapshot_expiry_failed.name
    expectation_failures = google_logging_metric.expectation_rows_failed.name
    backlog_age_alert_at = var.backlog_age_alert_seconds
  })
}
