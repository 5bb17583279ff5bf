# Log-based metrics and alerts. The library writes JSON log lines that Cloud Logging parses into
# jsonPayload (turnstile.logs); the fields used here are set by turnstile.protocol:
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

locals {
  sweeper_logs = "(resource.labels.service_name=\"${google_cloudfunctions2_function.sweeper.name}\" OR resource.labels.function_name=\"${google_cloudfunctions2_function.sweeper.name}\")"
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

  alert_strategy {
    auto_close = "3600s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = <<-EOT
      A backlog of `gs://${google_storage_bucket.inbound.name}` is not draining: the sweeper keeps
      restarting the subscriber of table `$${metric.label.table}` and every run fails to move it, or the
      sweeper itself keeps failing.

      1. `${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}` shows each table's lock,
         backlog and subscriber.
      2. Errors of the functions: Logs Explorer, `jsonPayload.table="$${metric.label.table}" severity>=WARNING`
         for the services `${google_cloudfunctions2_function.events.name}` and `${google_cloudfunctions2_function.sweeper.name}`.
      3. Failed calls of the sweeper: the Cloud Scheduler job `${google_cloud_scheduler_job.sweep.name}` in ${local.scheduler_region}.
    EOT
  }
}
