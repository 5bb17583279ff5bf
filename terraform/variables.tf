# Inputs of the turnstile deployment. example.tfvars shows a complete set; docs/DEPLOY.md explains them.

# -- where --------------------------------------------------------------------------------------------

variable "project_id" {
  description = "Project that holds the buckets, the functions and the Dataproc batches."
  type        = string
}

variable "region" {
  description = "Region of the inbound bucket, the functions, the Eventarc trigger (it must be the bucket's) and, by default, the Dataproc batches."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west1 or us-central1."
  }
}

variable "name" {
  description = "Prefix of every resource name (service accounts, functions, metrics): lowercase letters, digits, hyphens."
  type        = string
  default     = "turnstile"

  validation {
    # Service account ids are 6-30 characters; the longest suffix used is "-trigger" (8).
    condition     = can(regex("^[a-z][a-z0-9-]{2,20}[a-z0-9]$", var.name))
    error_message = "name must be 4-22 characters of lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "labels" {
  description = "Labels put on the buckets, the functions and every Dataproc batch."
  type        = map(string)
  default     = {}

  # They also label every Dataproc batch (DATAPROC_LABELS), whose API refuses the whole batch on a
  # label that breaks Google's rules.
  validation {
    condition = alltrue([
      for key, value in var.labels :
      can(regex("^[a-z][a-z0-9_-]{0,62}$", key)) && can(regex("^[a-z0-9_-]{0,63}$", value))
    ])
    error_message = "labels: keys must be a lowercase letter then up to 62 of [a-z0-9_-], values up to 63 of [a-z0-9_-] (Google's label rules)."
  }
}

variable "enable_apis" {
  description = "Enable the Google APIs turnstile uses (never disabled on destroy)."
  type        = bool
  default     = true
}

# -- buckets ------------------------------------------------------------------------------------------

variable "inbound_bucket_name" {
  description = "Name of the bucket upstream writes batches into; default: <project_id>-<name>-inbound."
  type        = string
  default     = null
}

variable "separate_state_bucket" {
  description = "Keep turnstile's own objects (backlog pointers, locks, claims, manifests, result records) in a bucket of their own with no trigger, so that they cost no function invocation: about 1.1 invocations per batch instead of 3.5, not counting upstream's data files (bench/results.md). false keeps them in the inbound bucket beside the batches, where gcs_ocn_bq_ingest kept its _backlog/ and _bqlock. Switch only with every table idle and no batch queued (docs/DEPLOY.md, State bucket)."
  type        = bool
  default     = false
}

variable "state_bucket_name" {
  description = "Name of the state bucket when separate_state_bucket is true; default: <project_id>-<name>-state."
  type        = string
  default     = null
}

variable "artifacts_bucket_name" {
  description = "Name of the bucket holding the function source, the job files and the jars; default: <project_id>-<name>-artifacts."
  type        = string
  default     = null
}

variable "warehouse_bucket_name" {
  description = "Name of the bucket holding the Iceberg tables; default: <project_id>-<name>-warehouse."
  type        = string
  default     = null
}

variable "dataproc_staging_bucket_name" {
  description = "Name of the Dataproc staging bucket of the batches (their dependencies, driver output, Spark history; DATAPROC_STAGING_BUCKET); default: <project_id>-<name>-dataproc."
  type        = string
  default     = null
}

variable "dataproc_staging_retention_days" {
  description = "Days after which the Dataproc staging bucket's objects (a batch's staged files, driver output and Spark history) are deleted."
  type        = number
  default     = 30

  validation {
    condition     = var.dataproc_staging_retention_days >= 1
    error_message = "dataproc_staging_retention_days must be at least 1: a running batch reads what it staged there."
  }
}

variable "kms_key_name" {
  description = "Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) for the default encryption of every bucket; null: Google-managed keys. The key must be in the buckets' location, so with a key, dataproc_region (the location of the warehouse and Dataproc staging buckets) must be region or unset."
  type        = string
  default     = null

  validation {
    condition     = var.kms_key_name == null || can(regex("^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$", coalesce(var.kms_key_name, "-")))
    error_message = "kms_key_name must be a key's resource name, projects/P/locations/L/keyRings/R/cryptoKeys/K."
  }
}

variable "force_destroy_buckets" {
  description = "Let terraform destroy delete buckets that still hold objects. Keep false outside of test projects."
  type        = bool
  default     = false
}

variable "job_record_retention_days" {
  description = "Days after which job manifests (*.manifest.json) and done signals (*.done) under <table>/_turnstile/jobs/ are deleted by the inbound bucket's lifecycle."
  type        = number
  default     = 30

  validation {
    condition     = var.job_record_retention_days >= 7
    error_message = "job_record_retention_days must be at least 7: a manifest is read while its job runs and when a failed table is unlocked."
  }
}

variable "table_prefixes" {
  description = "Known table prefixes (<dataset>/<table>) whose rejected rows (_failed/) and result records (_turnstile/results/) get lifecycle rules; lifecycle rules match name prefixes only, so these folders need the table named."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for t in var.table_prefixes : can(regex("^[A-Za-z_][A-Za-z0-9_]*/[A-Za-z_][A-Za-z0-9_]*$", t))])
    error_message = "each table prefix is <dataset>/<table> (letters, digits, underscores)."
  }
}

variable "failed_rows_retention_days" {
  description = "Days after which rejected rows under <table>/_failed/ of the tables in table_prefixes are deleted."
  type        = number
  default     = 90

  validation {
    condition     = var.failed_rows_retention_days >= 1 && floor(var.failed_rows_retention_days) == var.failed_rows_retention_days
    error_message = "failed_rows_retention_days must be a whole number of days, at least 1."
  }
}

variable "result_retention_days" {
  description = "Days after which result records under <table>/_turnstile/results/ of the tables in table_prefixes are deleted; null keeps them (they are a table's load history)."
  type        = number
  default     = null

  validation {
    condition     = var.result_retention_days == null || (coalesce(var.result_retention_days, 1) >= 1 && floor(coalesce(var.result_retention_days, 1)) == coalesce(var.result_retention_days, 1))
    error_message = "result_retention_days must be null (keep them) or a whole number of days, at least 1."
  }
}

variable "noncurrent_version_retention_days" {
  description = "Days a replaced or deleted object version is kept in the versioned artifacts and warehouse buckets."
  type        = number
  default     = 14

  validation {
    condition     = var.noncurrent_version_retention_days >= 1 && floor(var.noncurrent_version_retention_days) == var.noncurrent_version_retention_days
    error_message = "noncurrent_version_retention_days must be a whole number of days, at least 1."
  }
}

variable "operator_members" {
  description = "Principals (user:, group:, serviceAccount:) who run the turnstile CLI: object access to the inbound bucket (narrowed in iam.tf), and creating, reading and cancelling Dataproc batches as the batch service account (retry, backfill, cancel)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for m in var.operator_members : can(regex("^(user|group|serviceAccount):[^@\\s]+@[^@\\s]+$", m))])
    error_message = "operator_members must be IAM principals such as user:ana@example.com, group:data-ops@example.com or serviceAccount:ops@P.iam.gserviceaccount.com."
  }
}

# -- functions ----------------------------------------------------------------------------------------

variable "build_dir" {
  description = "Folder written by `make package` (function.zip, job/); default: build/ at the repository root."
  type        = string
  default     = null
}

variable "function_timeout_seconds" {
  description = "Timeout of both functions, and FUNCTION_TIMEOUT_SEC in their environment. Event-driven functions allow at most 540 s."
  type        = number
  default     = 540

  validation {
    condition     = var.function_timeout_seconds >= 60 && var.function_timeout_seconds <= 540
    error_message = "function_timeout_seconds must be 60-540: 540 s is the maximum for event-driven functions."
  }
}

variable "restart_buffer_seconds" {
  description = "RESTART_BUFFER_SECONDS: how long before the timeout a subscriber hands over to a new run."
  type        = number
  default     = 30

  # That it is below function_timeout_seconds is a precondition of the event function (functions.tf).
  validation {
    condition     = var.restart_buffer_seconds >= 0 && var.restart_buffer_seconds <= 600
    error_message = "restart_buffer_seconds must be 0-600 (RESTART_BUFFER_SECONDS), and below function_timeout_seconds."
  }
}

variable "function_memory" {
  description = "Memory of one instance of the event function."
  type        = string
  default     = "512Mi"
}

variable "function_cpu" {
  description = "vCPUs of one instance of the event function (concurrency above 1 needs at least 1)."
  type        = string
  default     = "1"

  validation {
    condition     = can(tonumber(var.function_cpu)) && try(tonumber(var.function_cpu) > 0 && tonumber(var.function_cpu) <= 8, false)
    error_message = "function_cpu must be a number of vCPUs, more than 0 and at most 8, e.g. \"1\" or \"0.5\"."
  }
}

variable "function_concurrency" {
  description = "Requests one event-function instance serves at once. See functions.tf for why 4."
  type        = number
  default     = 4

  validation {
    condition     = var.function_concurrency >= 1 && var.function_concurrency <= 16
    error_message = "function_concurrency must be 1-16 (gunicorn serves 4 threads per vCPU; more requests queue)."
  }

  # That it is 1 when function_cpu is below 1 is a precondition of the event function (functions.tf).
}

variable "function_max_instances" {
  description = "Upper bound of event-function instances: bounds the rate of Dataproc CreateBatch calls and of GCS operations."
  type        = number
  default     = 30

  validation {
    condition     = var.function_max_instances >= 1
    error_message = "function_max_instances must be at least 1."
  }
}

variable "log_level" {
  description = "LOG_LEVEL of the functions."
  type        = string
  default     = "INFO"

  validation {
    condition     = contains(["DEBUG", "INFO", "WARNING", "ERROR"], var.log_level)
    error_message = "log_level must be DEBUG, INFO, WARNING or ERROR."
  }
}

variable "sweep_schedule" {
  description = "Cron schedule (UTC) of the sweeper."
  type        = string
  default     = "*/5 * * * *"

  validation {
    condition     = length(split(" ", trimspace(var.sweep_schedule))) == 5
    error_message = "sweep_schedule must be a cron expression of five fields, e.g. \"*/5 * * * *\"."
  }
}

variable "scheduler_region" {
  description = "Region of the Cloud Scheduler job; default: region."
  type        = string
  default     = null
}

# -- protocol settings (docs/CONFIGURATION.md) --------------------------------------------------------

variable "success_filename" {
  description = "SUCCESS_FILENAME: the marker upstream writes last into a complete batch folder."
  type        = string
  default     = "_SUCCESS"

  validation {
    condition     = can(regex("^[^/\\n]+$", var.success_filename)) && !contains([".", ".."], var.success_filename)
    error_message = "success_filename must be one object name without a slash (SUCCESS_FILENAME), e.g. _SUCCESS."
  }

  # The inbound bucket's lifecycle deletes objects ending with these after job_record_retention_days.
  validation {
    condition     = !endswith(var.success_filename, ".done") && !endswith(var.success_filename, ".manifest.json")
    error_message = "success_filename must not end with .done or .manifest.json (SUCCESS_FILENAME): the inbound bucket's lifecycle rule deletes such objects after job_record_retention_days, queued batches' markers included."
  }
}

variable "destination_regex" {
  description = "DESTINATION_REGEX: a regex with named groups dataset and table replacing the default layout; null: the default layout."
  type        = string
  default     = null

  # Terraform's RE2 and Python's re agree on the syntax this needs: `(?P<name>...)` groups. The
  # library compiles it again at cold start (turnstile check-settings runs that check before apply).
  validation {
    condition = var.destination_regex == null || (
      can(regexall(var.destination_regex, "")) &&
      strcontains(coalesce(var.destination_regex, "-"), "(?P<dataset>") &&
      strcontains(coalesce(var.destination_regex, "-"), "(?P<table>")
    )
    error_message = "destination_regex must be a regular expression with the named groups (?P<dataset>...) and (?P<table>...) (DESTINATION_REGEX)."
  }
}

variable "order_per_table" {
  description = "ORDER_PER_TABLE: order every table as if each had _config/ORDERME."
  type        = bool
  default     = false
}

variable "start_backfill_filename" {
  description = "START_BACKFILL_FILENAME: when set (e.g. _HISTORYDONE), ordered batches only queue until this file exists at the table prefix."
  type        = string
  default     = null

  validation {
    condition     = var.start_backfill_filename == null || can(regex("^[^/\\n]+$", coalesce(var.start_backfill_filename, "-")))
    error_message = "start_backfill_filename must be one object name without a slash (START_BACKFILL_FILENAME), e.g. _HISTORYDONE."
  }

  validation {
    condition     = !endswith(coalesce(var.start_backfill_filename, "-"), ".done") && !endswith(coalesce(var.start_backfill_filename, "-"), ".manifest.json")
    error_message = "start_backfill_filename must not end with .done or .manifest.json (START_BACKFILL_FILENAME): the inbound bucket's lifecycle rule deletes such objects after job_record_retention_days."
  }
}

variable "wait_for_validation" {
  description = "WAIT_FOR_VALIDATION: pause an ordered table after each job until a new _BACKFILL is uploaded."
  type        = bool
  default     = false
}

variable "driver" {
  description = "DRIVER: how the Dataproc jobs run. warm (default): the functions queue each job in the bucket's spool (_turnstile/driver/) and one long-lived driver batch serves the jobs of every table, so a job pays its batches, not a 40-60 s start-up; the driver leaves when its stay-up policy says so (docs/DRIVER.md). per_job: one Dataproc Serverless batch per job."
  type        = string
  default     = "warm"

  validation {
    condition     = contains(["warm", "per_job"], var.driver)
    error_message = "driver must be warm or per_job."
  }
}

variable "driver_max_idle_seconds" {
  description = "DRIVER_MAX_IDLE_SECONDS: no warm driver batch stays idle longer, whatever its stay-up policy predicts."
  type        = number
  default     = 300

  validation {
    condition     = var.driver_max_idle_seconds > 0
    error_message = "driver_max_idle_seconds must be > 0."
  }
}

variable "driver_slots" {
  description = "DRIVER_SLOTS: how many jobs (of different tables) a warm driver batch runs side by side, each on a thread of its Spark application: the driver's cores (4 by default on Dataproc Serverless)."
  type        = number
  default     = 4

  validation {
    condition     = var.driver_slots >= 1 && var.driver_slots <= 32
    error_message = "driver_slots must be between 1 and 32."
  }
}

variable "driver_max_count" {
  description = "DRIVER_MAX_COUNT: warm driver batches taking requests at once. Another starts when requests waited longer than a start-up with the drivers up; extra drivers leave first when idle. 1: never more than one."
  type        = number
  default     = 4

  validation {
    condition     = var.driver_max_count >= 1 && var.driver_max_count <= 16
    error_message = "driver_max_count must be between 1 and 16."
  }
}

variable "driver_max_lifetime_seconds" {
  description = "DRIVER_MAX_LIFETIME_SECONDS: past this age a warm driver takes no new job and leaves (its successor runs the current code and config). Keep it below the batch TTL (4 hours) minus the longest job."
  type        = number
  default     = 3600

  validation {
    condition     = var.driver_max_lifetime_seconds > 0 && var.driver_max_lifetime_seconds <= 10800
    error_message = "driver_max_lifetime_seconds must be > 0 and at most 10800 (3 hours: the batch TTL is 4)."
  }
}

variable "driver_start_timeout_seconds" {
  description = "DRIVER_START_TIMEOUT_SECONDS: a warm job queued this long while no driver runs (launches refused, or batches that never start) fails as a transient failure naming why; the protocol retries it with backoff and blocks the table once job_retries run out."
  type        = number
  default     = 600

  validation {
    condition     = var.driver_start_timeout_seconds > 0
    error_message = "driver_start_timeout_seconds must be > 0."
  }
}

variable "job_prefix" {
  description = "JOB_PREFIX: prefix of every Dataproc batch id (1-20 lowercase letters, digits, hyphens); default: name (cut to 20), so two deployments in one project never share batch ids."
  type        = string
  default     = null

  validation {
    condition     = var.job_prefix == null || can(regex("^[a-z][a-z0-9-]{0,19}$", var.job_prefix))
    error_message = "job_prefix must be 1-20 lowercase letters, digits and hyphens, starting with a letter."
  }
}

variable "stale_claim_seconds" {
  description = "STALE_CLAIM_SECONDS: age after which the sweeper deletes a claim object."
  type        = number
  default     = 3600

  validation {
    condition     = var.stale_claim_seconds >= 60
    error_message = "stale_claim_seconds must be at least 60 (STALE_CLAIM_SECONDS)."
  }
}

# -- Dataproc Serverless ------------------------------------------------------------------------------

variable "dataproc_region" {
  description = "Region of the Dataproc Serverless batches (and of the BigLake catalog); default: region."
  type        = string
  default     = null

  validation {
    condition     = var.dataproc_region == null || can(regex("^[a-z]+-[a-z]+[0-9]+$", coalesce(var.dataproc_region, "-")))
    error_message = "dataproc_region must be a Google Cloud region such as europe-west1 (DATAPROC_REGION)."
  }
}

variable "dataproc_runtime_version" {
  description = "Dataproc Serverless runtime: 2.2 is Spark 3.5.1, Scala 2.13, Java 17, Python 3.12 (the staged Iceberg runtime is the Scala 2.13 build, job/deps.zip is built for Python 3.12)."
  type        = string
  default     = "2.2"

  validation {
    condition     = var.dataproc_runtime_version == "2.2"
    error_message = "dataproc_runtime_version must be 2.2: make package stages the Scala 2.13 Iceberg runtime and builds the job's dependencies for its Python 3.12 (turnstile.deploy.packaging DATAPROC_RUNTIME, DATAPROC_PYTHON)."
  }
}

variable "dataproc_subnetwork" {
  description = "Subnetwork URI for the batches (Private Google Access on); null: the region's subnetwork of the default network."
  type        = string
  default     = null

  validation {
    condition     = var.dataproc_subnetwork == null || can(regex("^((https://www.googleapis.com/compute/v1/)?projects/[^/]+/regions/[^/]+/subnetworks/)?[a-z]([-a-z0-9]*[a-z0-9])?$", coalesce(var.dataproc_subnetwork, "-")))
    error_message = "dataproc_subnetwork must be a subnetwork URI, projects/P/regions/R/subnetworks/S, or a subnetwork's name (DATAPROC_SUBNETWORK)."
  }
}

variable "dataproc_properties" {
  description = "Extra Spark properties for every batch (DATAPROC_PROPERTIES); they override the catalog properties turnstile sets."
  type        = map(string)
  default     = {}
}

# -- Iceberg catalog ----------------------------------------------------------------------------------

variable "iceberg_catalog" {
  description = "Spark catalog name of the tables (<catalog>.<dataset>.<table>); with the biglake type also the BigLake catalog id."
  type        = string
  default     = "turnstile"

  validation {
    condition     = can(regex("^[a-z][a-z0-9_]{0,63}$", var.iceberg_catalog))
    error_message = "iceberg_catalog must be lowercase letters, digits and underscores, starting with a letter."
  }
}

variable "iceberg_catalog_type" {
  description = "biglake: BigLake metastore through Google's BigLake catalog plugin (a catalog created here); rest: the BigLake metastore Iceberg REST catalog (see docs/DEPLOY.md for its one-time catalog creation and extra jar)."
  type        = string
  default     = "biglake"

  validation {
    condition     = contains(["biglake", "rest"], var.iceberg_catalog_type)
    error_message = "iceberg_catalog_type must be biglake or rest (hadoop needs atomic rename, which GCS lacks)."
  }
}

variable "biglake_catalog_jar_uri" {
  description = "Google's BigLake Iceberg catalog plugin, staged with the batches when iceberg_catalog_type is biglake."
  type        = string
  default     = "gs://spark-lib/biglake/biglake-catalog-iceberg1.2.0-0.1.1-with-dependencies.jar"

  validation {
    condition     = can(regex("^gs://[^/]+/.+\\.jar$", var.biglake_catalog_jar_uri))
    error_message = "biglake_catalog_jar_uri must be the gs:// URI of a .jar (a Dataproc batch fetches it)."
  }
}

variable "iceberg_rest_uri" {
  description = "Iceberg REST catalog endpoint when iceberg_catalog_type is rest."
  type        = string
  default     = "https://biglake.googleapis.com/iceberg/v1/restcatalog"

  validation {
    condition     = can(regex("^https://", var.iceberg_rest_uri))
    error_message = "iceberg_rest_uri must be an https:// URL (ICEBERG_CATALOG_URI)."
  }
}

variable "extra_jar_uris" {
  description = "More gs:// jars for every batch (e.g. the iceberg-gcp-bundle jar the rest catalog type needs)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for uri in var.extra_jar_uris : can(regex("^(gs://[^/]+/|file:///).+\\.jar$", uri))])
    error_message = "extra_jar_uris: each must be the gs:// (or file:///) URI of a .jar (JOB_JAR_URIS: a Dataproc batch fetches them)."
  }
}

variable "catalog_extra_permissions" {
  description = "Permissions added to the batch service account's catalog role, should the catalog ask for one more (biglake.* or bigquery.* only)."
  type        = list(string)
  default     = []

  # They go into a project-level custom role: only the catalog's own services, one permission at a
  # time (no wildcards), and never one that changes IAM (setIamPolicy, iam.*).
  validation {
    condition = alltrue([
      for p in var.catalog_extra_permissions :
      can(regex("^(biglake|bigquery)\\.[A-Za-z]+\\.[A-Za-z]+$", p)) && !endswith(p, ".setIamPolicy")
    ])
    error_message = "catalog_extra_permissions: each entry must be one permission of biglake or bigquery, spelled out (e.g. biglake.tables.delete): no wildcards, no *.setIamPolicy, no other service."
  }
}

# -- monitoring ---------------------------------------------------------------------------------------

variable "notification_channels" {
  description = "Monitoring notification channel ids (projects/P/notificationChannels/N) the alerts notify."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.notification_channels : can(regex("^projects/[^/]+/notificationChannels/[^/]+$", c))])
    error_message = "notification_channels must be channel ids of the form projects/P/notificationChannels/N."
  }
}

variable "stall_window_seconds" {
  description = "Window over which the sweeper's subscriber restarts of one table are counted."
  type        = number
  default     = 3600

  validation {
    condition     = var.stall_window_seconds >= 60 && var.stall_window_seconds <= 86400
    error_message = "stall_window_seconds must be 60-86400 (an alignment period of Cloud Monitoring)."
  }
}

variable "stall_restart_threshold" {
  description = "Alert when the sweeper restarted the subscriber of one table more than this many times within stall_window_seconds."
  type        = number
  default     = 3

  validation {
    condition     = var.stall_restart_threshold >= 0
    error_message = "stall_restart_threshold must be 0 or more."
  }
}

variable "retry_alert_threshold" {
  description = "Alert when the jobs of one table were retried for transient failures more than this many times within an hour."
  type        = number
  default     = 5

  validation {
    condition     = var.retry_alert_threshold >= 0
    error_message = "retry_alert_threshold must be 0 or more (0: alert on the first retry)."
  }
}

variable "backlog_age_alert_seconds" {
  description = "Alert when the oldest pending batch of an ordered table has waited longer than this many seconds (the sweeper measures it at every sweep)."
  type        = number
  default     = 3600

  validation {
    condition     = var.backlog_age_alert_seconds > 0
    error_message = "backlog_age_alert_seconds must be more than 0 (seconds)."
  }
}

variable "timeout_alert_threshold" {
  description = "Alert when the watchdog cancelled more than this many jobs of one table (past job_timeout_seconds) within an hour; each is retried, so 1 tolerates a single timeout."
  type        = number
  default     = 1

  validation {
    condition     = var.timeout_alert_threshold >= 0
    error_message = "timeout_alert_threshold must be 0 or more (0: alert on the first timeout)."
  }
}

variable "reconciled_alert_threshold" {
  description = "Alert when the sweeper published more than this many batches within an hour whose object event never came (lost notifications)."
  type        = number
  default     = 3

  validation {
    condition     = var.reconciled_alert_threshold >= 0
    error_message = "reconciled_alert_threshold must be 0 or more (0: alert on the first lost event)."
  }
}
