# turnstile: ordered, exactly-once ingestion of GCS file batches into Apache Iceberg tables.
#
#   inbound bucket --object.finalized--> Eventarc --> <name>-events (Cloud Function, 2nd gen)
#                                                         | CreateBatch / GetBatch
#                                                         v
#   Cloud Scheduler --POST {"buckets": [...]}--> <name>-sweeper      Dataproc Serverless batch
#                                                                     (reads the inbound bucket,
#                                                                      commits to Iceberg tables in
#                                                                      the warehouse bucket)
#
# Files: storage.tf (buckets), artifacts.tf (what the functions and batches run), iam.tf (service
# accounts and every grant), functions.tf (functions, trigger, scheduler), catalog.tf (BigLake),
# monitoring.tf (log-based metrics and alerts), outputs.tf.

data "google_project" "this" {
  project_id = var.project_id
}

# The Cloud Storage service agent publishes the bucket's object events to Eventarc's Pub/Sub topic.
data "google_storage_project_service_account" "gcs" {
  project = var.project_id
}

locals {
  dataproc_region  = coalesce(var.dataproc_region, var.region)
  job_prefix       = coalesce(var.job_prefix, substr(var.name, 0, 20))
  scheduler_region = coalesce(var.scheduler_region, var.region)

  inbound_bucket   = coalesce(var.inbound_bucket_name, "${var.project_id}-${var.name}-inbound")
  artifacts_bucket = coalesce(var.artifacts_bucket_name, "${var.project_id}-${var.name}-artifacts")
  state_bucket     = var.separate_state_bucket ? coalesce(var.state_bucket_name, "${var.project_id}-${var.name}-state") : ""
  warehouse_bucket = coalesce(var.warehouse_bucket_name, "${var.project_id}-${var.name}-warehouse")
  # The batches' own Dataproc staging bucket (iam.tf says why they need one).
  dataproc_staging_bucket = coalesce(var.dataproc_staging_bucket_name, "${var.project_id}-${var.name}-dataproc")

  labels = merge(var.labels, { app = "turnstile", deployment = var.name })

  # One number for the deployed timeout of both functions and for FUNCTION_TIMEOUT_SEC: the
  # subscriber hands over RESTART_BUFFER_SECONDS before it, and the sweeper judges a subscriber run
  # dead (its claim's lease over) after it. If the two disagreed, a run would be killed mid-work
  # (env above the timeout) or handed over needlessly early (env below it).
  function_timeout_seconds = var.function_timeout_seconds

  # Iceberg catalog: the library's catalog_properties() sets the catalog keys from ICEBERG_*; the
  # REST catalog also needs Google auth and a quota project, passed as extra Spark properties.
  iceberg_warehouse = (
    var.iceberg_catalog_type == "rest"
    ? "gs://${local.warehouse_bucket}"
    : "gs://${local.warehouse_bucket}/iceberg"
  )
  iceberg_catalog_uri = var.iceberg_catalog_type == "rest" ? var.iceberg_rest_uri : ""
  # (A filtered map, not `cond ? {...} : {}`: the two branches would be objects of different types.)
  catalog_properties = {
    for key, value in {
      "spark.sql.catalog.${var.iceberg_catalog}.header.x-goog-user-project" = var.project_id
      "spark.sql.catalog.${var.iceberg_catalog}.rest.auth.type"             = "org.apache.iceberg.gcp.auth.GoogleAuthManager"
    } : key => value if var.iceberg_catalog_type == "rest"
  }
  # The job (turnstile.spark.main) reads its own settings from the driver's environment, which the
  # functions' environment does not reach: Serverless sets driver variables from these properties.
  # Without ICEBERG_CATALOG the job would write to the default catalog name, not var.iceberg_catalog.
  job_driver_env = {
    "spark.dataproc.driverEnv.ICEBERG_CATALOG"      = var.iceberg_catalog
    "spark.dataproc.driverEnv.GOOGLE_CLOUD_PROJECT" = var.project_id
  }
  dataproc_properties = merge(local.catalog_properties, local.job_driver_env, var.dataproc_properties)
  dataproc_labels     = local.labels

  job_jar_uris = concat(
    [for jar in sort(keys(google_storage_bucket_object.job_jars)) : "gs://${local.artifacts_bucket}/${google_storage_bucket_object.job_jars[jar].name}"],
    var.iceberg_catalog_type == "biglake" ? [var.biglake_catalog_jar_uri] : [],
    var.extra_jar_uris,
  )

  # The functions' environment: every key is a turnstile.config.settings alias (tests/terraform checks it
  # against Settings.variables()).
  function_env_all = {
    JOB_RUNNER                   = "dataproc"
    GOOGLE_CLOUD_PROJECT         = var.project_id
    FUNCTION_TIMEOUT_SEC         = tostring(local.function_timeout_seconds)
    RESTART_BUFFER_SECONDS       = tostring(var.restart_buffer_seconds)
    LOG_LEVEL                    = var.log_level
    SUCCESS_FILENAME             = var.success_filename
    DESTINATION_REGEX            = var.destination_regex == null ? "" : var.destination_regex
    ORDER_PER_TABLE              = tostring(var.order_per_table)
    START_BACKFILL_FILENAME      = var.start_backfill_filename == null ? "" : var.start_backfill_filename
    WAIT_FOR_VALIDATION          = tostring(var.wait_for_validation)
    STATE_BUCKET                 = local.state_bucket
    JOB_PREFIX                   = local.job_prefix
    STALE_CLAIM_SECONDS          = tostring(var.stale_claim_seconds)
    DATAPROC_REGION              = local.dataproc_region
    DATAPROC_RUNTIME_VERSION     = var.dataproc_runtime_version
    DATAPROC_SERVICE_ACCOUNT     = google_service_account.batch.email
    DATAPROC_SUBNETWORK          = var.dataproc_subnetwork == null ? "" : var.dataproc_subnetwork
    DATAPROC_STAGING_BUCKET      = google_storage_bucket.dataproc_staging.name
    DATAPROC_PROPERTIES          = jsonencode(local.dataproc_properties)
    DATAPROC_LABELS              = jsonencode(local.dataproc_labels)
    JOB_MAIN_URI                 = "gs://${local.artifacts_bucket}/${google_storage_bucket_object.job_main.name}"
    DRIVER                       = var.driver
    DRIVER_MAIN_URI              = "gs://${local.artifacts_bucket}/${google_storage_bucket_object.job_driver.name}"
    DRIVER_MAX_IDLE_SECONDS      = tostring(var.driver_max_idle_seconds)
    DRIVER_MAX_LIFETIME_SECONDS  = tostring(var.driver_max_lifetime_seconds)
    DRIVER_START_TIMEOUT_SECONDS = tostring(var.driver_start_timeout_seconds)
    DRIVER_SLOTS                 = tostring(var.driver_slots)
    DRIVER_MAX_COUNT             = tostring(var.driver_max_count)
    JOB_PYTHON_FILE_URIS         = "gs://${local.artifacts_bucket}/${google_storage_bucket_object.job_package.name}"
    JOB_JAR_URIS                 = join(",", local.job_jar_uris)
    JOB_ARCHIVE_URIS             = "gs://${local.artifacts_bucket}/${google_storage_bucket_object.job_dependencies.name}#turnstile_deps"
    ICEBERG_CATALOG              = var.iceberg_catalog
    ICEBERG_CATALOG_TYPE         = var.iceberg_catalog_type
    ICEBERG_WAREHOUSE            = local.iceberg_warehouse
    ICEBERG_CATALOG_URI          = local.iceberg_catalog_uri
  }
  # Empty values are dropped (the settings treat them as unset anyway), but only those of the keys
  # whose values come straight from optional inputs, known at plan: a filter on every value would
  # make the whole map unknown at plan whenever one value is (DATAPROC_SERVICE_ACCOUNT on a first
  # apply), and the plan would hold no environment for `turnstile check-settings` to check.
  function_env_optional_keys = ["DESTINATION_REGEX", "START_BACKFILL_FILENAME", "STATE_BUCKET", "DATAPROC_SUBNETWORK", "ICEBERG_CATALOG_URI"]
  function_env = merge(
    { for key, value in local.function_env_all : key => value if !contains(local.function_env_optional_keys, key) },
    { for key in local.function_env_optional_keys : key => local.function_env_all[key] if local.function_env_all[key] != "" },
  )

  # What an operator's `turnstile` needs to read the bucket as the functions do: the project and the
  # layout settings that differ from the library's defaults.
  operator_setting_defaults = {
    GOOGLE_CLOUD_PROJECT    = ""
    SUCCESS_FILENAME        = "_SUCCESS"
    DESTINATION_REGEX       = ""
    ORDER_PER_TABLE         = "false"
    START_BACKFILL_FILENAME = ""
    WAIT_FOR_VALIDATION     = "false"
  }
  operator_env = {
    for key, default in local.operator_setting_defaults :
    key => local.function_env[key] if lookup(local.function_env, key, default) != default
  }
  operator_env_prefix = join(" ", [for key in sort(keys(local.operator_env)) : "${key}='${replace(local.operator_env[key], "'", "'\\''")}'"])

  # What an operator's `turnstile retry`, `backfill` and `cancel` need on top to start and cancel
  # jobs as the functions do: the runner and every job setting the functions carry (JOB_RUNNER,
  # JOB_*, DATAPROC_*, ICEBERG_*, DRIVER*: a warm job is read from the spool, not as a batch).
  # Without them the CLI refuses (its default runner is this machine).
  # Filtered by key, so the keys stay known at plan.
  operator_job_env = merge(local.operator_env, {
    for key, value in local.function_env : key => value
    if startswith(key, "JOB_") || startswith(key, "DATAPROC_") || startswith(key, "ICEBERG_") || startswith(key, "DRIVER")
  })
  operator_job_env_prefix = join(" ", [for key in sort(keys(local.operator_job_env)) : "${key}='${replace(local.operator_job_env[key], "'", "'\\''")}'"])
}

resource "google_project_service" "apis" {
  for_each = var.enable_apis ? toset([
    "artifactregistry.googleapis.com",
    "biglake.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudfunctions.googleapis.com",
    "cloudscheduler.googleapis.com",
    "dataproc.googleapis.com",
    "eventarc.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "pubsub.googleapis.com",
    "run.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
  ]) : toset([])

  project            = var.project_id
  service            = each.value
  disable_on_destroy = false
}
