# Buckets: inbound (upstream's batches and turnstile's state objects), state (with
# separate_state_bucket), artifacts (what the functions and the batches run), warehouse (the Iceberg
# tables), dataproc_staging (the batches' staging bucket). All: uniform bucket-level access, public
# access prevention enforced, optional CMEK, IAM granted per bucket in iam.tf (never project-wide).

resource "google_storage_bucket" "inbound" {
  #checkov:skip=CKV_GCP_62:Usage logs are not used: Google recommends Cloud Audit Logs (Data Access logs of storage.googleapis.com, enabled per project) to audit object access; they also record the caller's identity.
  #checkov:skip=CKV_GCP_78:No versioning on purpose: turnstile rewrites _bqlock and _BACKFILL and creates and deletes claims and pointers for every batch, so noncurrent copies would multiply objects and cost; they are no recovery path either (restoring an old lock generation would undo a compare-and-swap), and the batches are upstream's copies.
  # For the same reason no soft delete (soft_delete_policy below): Cloud Storage keeps every
  # overwritten or deleted object for 7 days by default and bills for it, which for this bucket
  # means every lock rewrite, claim, pointer and _BACKFILL generation of every batch.
  name                        = local.inbound_bucket
  project                     = var.project_id
  location                    = var.region # the Eventarc trigger must be in the bucket's region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  # Overwritten and deleted objects are gone at once (see the versioning note above).
  soft_delete_policy {
    retention_duration_seconds = 0
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  # turnstile's own leftovers. Lifecycle conditions match name prefixes and suffixes only, so:
  # - job manifests and done signals under <table>/_turnstile/jobs/ are matched by their suffixes
  #   (.manifest.json, .done), which no other object of turnstile's layout ends with: a manifest is
  #   read while its job runs and when a FAILED table is unlocked, so they are kept for weeks. The
  #   rule is bucket-wide, so it also deletes upstream objects with these suffixes after that age
  #   (docs/DEPLOY.md, Buckets); SUCCESS_FILENAME and START_BACKFILL_FILENAME may not end with them
  #   (variables.tf and the settings refuse it), or queued markers would be deleted;
  # - claims (<folder>/_claimed_<name>_created_at_<generation>) can be matched neither way: the
  #   sweeper deletes those older than STALE_CLAIM_SECONDS;
  # - rejected rows (_failed/) and result records live under each table's prefix: one rule per
  #   table listed in var.table_prefixes;
  # - never a blanket age rule: _bqlock, _backlog/ pointers and _config/ must outlive any age.
  lifecycle_rule {
    condition {
      age            = var.job_record_retention_days
      matches_suffix = [".manifest.json", ".done"]
    }
    action {
      type = "Delete"
    }
  }

  dynamic "lifecycle_rule" {
    for_each = length(var.table_prefixes) == 0 ? [] : [1]
    content {
      condition {
        age            = var.failed_rows_retention_days
        matches_prefix = [for t in var.table_prefixes : "${t}/_failed/"]
      }
      action {
        type = "Delete"
      }
    }
  }

  dynamic "lifecycle_rule" {
    for_each = length(var.table_prefixes) == 0 || var.result_retention_days == null ? [] : [var.result_retention_days]
    content {
      condition {
        age            = lifecycle_rule.value
        matches_prefix = [for t in var.table_prefixes : "${t}/_turnstile/results/"]
      }
      action {
        type = "Delete"
      }
    }
  }

  # Upstream uploads that never completed.
  lifecycle_rule {
    condition {
      age = 7
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }

  # A CMEK key must be in the location of the bucket it encrypts; kms_key_name serves every bucket,
  # and the warehouse and Dataproc staging buckets are in dataproc_region.
  lifecycle {
    precondition {
      condition     = var.kms_key_name == null || (split("/", coalesce(var.kms_key_name, "-/-/-/-"))[3] == var.region && local.dataproc_region == var.region)
      error_message = "kms_key_name must be a key in region (its location part), and with a key dataproc_region must be region or unset: one key encrypts every bucket, and the warehouse and Dataproc staging buckets are in dataproc_region."
    }
  }

  depends_on = [google_project_service.apis, google_kms_crypto_key_iam_member.gcs_agent]
}

# With separate_state_bucket, turnstile's own objects (pointers, locks, claims, manifests, result
# records) live here, and no trigger watches this bucket: they cost no function invocation. What
# must wake a function stays in the inbound bucket (each job's .done signal among them). No
# versioning and no soft delete, for the reasons given on the inbound bucket.
resource "google_storage_bucket" "state" {
  #checkov:skip=CKV_GCP_62:Usage logs are not used: Google recommends Cloud Audit Logs (Data Access logs of storage.googleapis.com, enabled per project) to audit object access.
  #checkov:skip=CKV_GCP_78:No versioning on purpose: every batch rewrites _bqlock and creates and deletes claims and pointers here; see the inbound bucket.
  count = var.separate_state_bucket ? 1 : 0

  name                        = local.state_bucket
  project                     = var.project_id
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  soft_delete_policy {
    retention_duration_seconds = 0
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      age            = var.job_record_retention_days
      matches_suffix = [".manifest.json"]
    }
    action {
      type = "Delete"
    }
  }

  dynamic "lifecycle_rule" {
    for_each = length(var.table_prefixes) == 0 || var.result_retention_days == null ? [] : [var.result_retention_days]
    content {
      condition {
        age            = lifecycle_rule.value
        matches_prefix = [for t in var.table_prefixes : "${t}/_turnstile/results/"]
      }
      action {
        type = "Delete"
      }
    }
  }

  depends_on = [google_project_service.apis, google_kms_crypto_key_iam_member.gcs_agent]
}

# The inbound bucket names its state bucket at its root, so an operator's command finds the backlog
# and the locks without STATE_BUCKET set (and refuses a STATE_BUCKET that names another bucket).
resource "google_storage_bucket_object" "state_marker" {
  count = var.separate_state_bucket ? 1 : 0

  bucket  = google_storage_bucket.inbound.name
  name    = "_STATE_BUCKET"
  content = google_storage_bucket.state[0].name
}

resource "google_storage_bucket" "artifacts" {
  #checkov:skip=CKV_GCP_62:Usage logs are not used: Google recommends Cloud Audit Logs (Data Access logs of storage.googleapis.com, enabled per project) to audit object access.
  name                        = local.artifacts_bucket
  project                     = var.project_id
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  # Every object name carries its content hash, so nothing is overwritten in normal use; versions
  # protect against a mistaken delete for noncurrent_version_retention_days.
  versioning {
    enabled = true
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_retention_days
      with_state                 = "ARCHIVED"
      send_age_if_zero           = false
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis, google_kms_crypto_key_iam_member.gcs_agent]
}

resource "google_storage_bucket" "warehouse" {
  #checkov:skip=CKV_GCP_62:Usage logs are not used: Google recommends Cloud Audit Logs (Data Access logs of storage.googleapis.com, enabled per project) to audit object access.
  name                        = local.warehouse_bucket
  project                     = var.project_id
  location                    = local.dataproc_region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  # Iceberg deletes files only when snapshots expire or orphans are removed; versions make such a
  # delete recoverable for noncurrent_version_retention_days.
  versioning {
    enabled = true
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_retention_days
      with_state                 = "ARCHIVED"
      send_age_if_zero           = false
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis, google_kms_crypto_key_iam_member.gcs_agent]
}

# The batches' Dataproc staging bucket (DATAPROC_STAGING_BUCKET, ExecutionConfig.staging_bucket):
# staged dependencies, config files, driver output and Spark history. Without it Dataproc creates
# project-level staging and temp buckets under names of its own, which the batch account could only
# reach with project-wide storage permissions (iam.tf). Ephemeral: deleted after
# dataproc_staging_retention_days, no versions, no soft delete (Dataproc's own staging buckets keep
# none either).
resource "google_storage_bucket" "dataproc_staging" {
  #checkov:skip=CKV_GCP_62:Usage logs are not used: Google recommends Cloud Audit Logs (Data Access logs of storage.googleapis.com, enabled per project) to audit object access.
  #checkov:skip=CKV_GCP_78:No versioning on purpose: the bucket holds each batch's ephemeral files (staged dependencies, driver output, Spark history), deleted by age; nothing in it is a record to recover.
  name                        = local.dataproc_staging_bucket
  project                     = var.project_id
  location                    = local.dataproc_region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy_buckets
  labels                      = local.labels

  soft_delete_policy {
    retention_duration_seconds = 0
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  lifecycle_rule {
    condition {
      age = var.dataproc_staging_retention_days
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.apis, google_kms_crypto_key_iam_member.gcs_agent]
}
