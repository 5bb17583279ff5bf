# The two Cloud Functions (2nd gen, Python 3.12) built from one source archive, the Eventarc trigger
# on the inbound bucket and the sweeper's schedule.
#
# Timeout: 540 s, the maximum for event-driven functions, by default. A subscriber run works until
# FUNCTION_TIMEOUT_SEC - RESTART_BUFFER_SECONDS and then hands over through a new _BACKFILL
# generation, so a longer timeout means fewer hand-overs (fewer invocations and _BACKFILL writes),
# never a longer wait: no invocation waits for a Dataproc batch. FUNCTION_TIMEOUT_SEC is set from the
# same local as timeout_seconds (main.tf), so the library's deadline and lease always match the
# deployed timeout; the sweeper, which judges whether a subscriber run is still alive by that lease,
# gets the same value and the same timeout.
#
# Concurrency: 4 requests per instance with 1 vCPU. The handlers are I/O-bound (GCS and Dataproc
# calls), keep no module-level state and every shared write is conditional, so concurrent events in
# one instance are as safe as in separate ones. functions-framework serves 4 threads per vCPU
# (gunicorn), so a 5th request would queue inside the instance behind a possibly long subscriber
# run; 4 amortises cold starts over the many events that return at once (data files, claims, state
# objects: most events) without that queueing. Max instances bounds CreateBatch calls (quota 200 per
# minute per region) and GCS load; when all are busy, Eventarc retries with backoff.
#
# Retries: RETRY_POLICY_RETRY. The library acknowledges terminal errors itself and raises only
# transient ones, which Eventarc then redelivers with backoff for up to 24 hours.

resource "google_cloudfunctions2_function" "events" {
  project     = var.project_id
  name        = "${var.name}-events"
  location    = var.region
  description = "turnstile: handles every object finalized in gs://${google_storage_bucket.inbound.name}"
  labels      = local.labels

  build_config {
    runtime           = "python312"
    entry_point       = "on_object_finalized"
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.artifacts.name
        object = google_storage_bucket_object.function_source.name
      }
    }
  }

  service_config {
    timeout_seconds                  = local.function_timeout_seconds
    available_memory                 = var.function_memory
    available_cpu                    = var.function_cpu
    max_instance_request_concurrency = var.function_concurrency
    min_instance_count               = 0
    max_instance_count               = var.function_max_instances
    ingress_settings                 = "ALLOW_INTERNAL_ONLY" # Eventarc in the same project counts as internal
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.functions.email
    environment_variables            = local.function_env
  }

  event_trigger {
    trigger_region        = var.region # the bucket's region
    event_type            = "google.cloud.storage.object.v1.finalized"
    retry_policy          = "RETRY_POLICY_RETRY"
    service_account_email = google_service_account.trigger.email

    event_filters {
      attribute = "bucket"
      value     = google_storage_bucket.inbound.name
    }
  }

  lifecycle {
    precondition {
      condition     = var.restart_buffer_seconds < local.function_timeout_seconds
      error_message = "restart_buffer_seconds must be less than function_timeout_seconds, or a subscriber run has no time to work."
    }
    # Cloud Run refuses concurrency above 1 on less than one vCPU, but only at apply.
    precondition {
      condition     = var.function_concurrency == 1 || tonumber(var.function_cpu) >= 1
      error_message = "function_concurrency must be 1 when function_cpu is below 1: Cloud Run serves concurrent requests only with at least one vCPU."
    }
  }

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.gcs_agent_publisher,
    google_project_iam_member.trigger_receiver,
    google_project_iam_member.build_logs,
    google_artifact_registry_repository_iam_member.build_pushes_images,
    google_storage_bucket_iam_member.build_reads_source,
  ]
}

# The sweeper: HTTP, called by Cloud Scheduler only. One instance serving one request: sweeps never
# overlap (an overlapping call is refused with 429 and shows in the scheduler's failure alert).
resource "google_cloudfunctions2_function" "sweeper" {
  project     = var.project_id
  name        = "${var.name}-sweeper"
  location    = var.region
  description = "turnstile: restarts stalled tables, reports blocked ones, deletes stale claims in gs://${google_storage_bucket.inbound.name}"
  labels      = local.labels

  build_config {
    runtime           = "python312"
    entry_point       = "sweep"
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.artifacts.name
        object = google_storage_bucket_object.function_source.name
      }
    }
  }

  service_config {
    timeout_seconds                  = local.function_timeout_seconds
    available_memory                 = "512Mi"
    available_cpu                    = "1"
    max_instance_request_concurrency = 1
    min_instance_count               = 0
    max_instance_count               = 1
    ingress_settings                 = "ALLOW_INTERNAL_ONLY" # Cloud Scheduler in the same project counts as internal
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.functions.email
    environment_variables            = local.function_env
  }

  depends_on = [
    google_project_service.apis,
    google_project_iam_member.build_logs,
    google_artifact_registry_repository_iam_member.build_pushes_images,
    google_storage_bucket_iam_member.build_reads_source,
  ]
}

resource "google_cloud_scheduler_job" "sweep" {
  project          = var.project_id
  region           = local.scheduler_region
  name             = "${var.name}-sweep"
  description      = "Calls the turnstile sweeper for gs://${google_storage_bucket.inbound.name}"
  schedule         = var.sweep_schedule
  time_zone        = "Etc/UTC"
  attempt_deadline = "${local.function_timeout_seconds}s"

  # The next tick sweeps again; a retry would only overlap with it.
  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.sweeper.service_config[0].uri
    headers     = { "Content-Type" = "application/json" }
    body        = base64encode(jsonencode({ buckets = [google_storage_bucket.inbound.name] }))

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = google_cloudfunctions2_function.sweeper.service_config[0].uri
    }
  }

  depends_on = [google_project_service.apis, google_cloud_run_service_iam_member.scheduler_invokes_sweeper]
}
