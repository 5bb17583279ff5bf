# What the functions and the Dataproc batches run, built by `make package` into build/ and staged in
# the artifacts bucket. Object names carry the content's hash: a changed build gets new names (the
# function is rebuilt and new batches use the new job files), an unchanged one changes nothing.
#
# Caveat: Terraform deletes the objects a new build replaces. A batch created before the apply but
# started after it would not find its files and fail, blocking its table until `turnstile unlock`.
# Deploy when no batch is pending (docs/DEPLOY.md).

locals {
  build_dir     = abspath(coalesce(var.build_dir, "${path.module}/../build"))
  function_zip  = "${local.build_dir}/function.zip"
  job_main_file = "${local.build_dir}/job/main.py"
  job_driver    = "${local.build_dir}/job/driver.py"
  job_package   = "${local.build_dir}/job/turnstile.zip"
  job_deps      = "${local.build_dir}/job/deps.zip"
  job_jar_files = fileset("${local.build_dir}/job/jars", "*.jar")

  # What `make package` writes and the deployment cannot do without, each checked before its hash
  # is taken (a missing file would otherwise fail the plan inside filesha256 with no hint), and
  # refused by the precondition below, naming `make package`. Without an Iceberg runtime jar every
  # batch would fail at its first Iceberg call (`--no-jars` builds); without deps.zip (`--no-deps`)
  # the job cannot import its dependencies.
  build_missing = concat(
    [for file in [local.function_zip, local.job_main_file, local.job_driver, local.job_package, local.job_deps] : file if !fileexists(file)],
    length([for jar in local.job_jar_files : jar if startswith(jar, "iceberg-spark-runtime-")]) > 0 ? [] : ["${local.build_dir}/job/jars/iceberg-spark-runtime-*.jar"],
  )
  build_hashes = { for file in [local.function_zip, local.job_main_file, local.job_driver, local.job_package, local.job_deps] : file => fileexists(file) ? filesha256(file) : "missing" }

  job_version = substr(sha256(join(",", [local.build_hashes[local.job_main_file], local.build_hashes[local.job_driver], local.build_hashes[local.job_package], local.build_hashes[local.job_deps]])), 0, 16)
  # (md5 as before: an unchanged function.zip keeps its deployed object's name)
  function_version = fileexists(local.function_zip) ? filemd5(local.function_zip) : "missing"
}

# Refuses a plan on an incomplete build, before anything is uploaded. A `check` block would only
# warn, and the batches would fail at their first Iceberg call.
resource "terraform_data" "build" {
  input = local.job_version

  lifecycle {
    precondition {
      condition     = length(local.build_missing) == 0
      error_message = "The build in build_dir lacks ${join(", ", local.build_missing)}: run `make package` (it builds function.zip, job/main.py, job/driver.py, job/turnstile.zip, job/deps.zip and job/jars/), or point build_dir at a complete build."
    }
  }
}

# Functions source: functions/main.py and requirements.txt with the turnstile modules they import.
resource "google_storage_bucket_object" "function_source" {
  name         = "functions/source-${local.function_version}.zip"
  bucket       = google_storage_bucket.artifacts.name
  source       = local.function_zip
  content_type = "application/zip"

  depends_on = [terraform_data.build]
}

resource "google_storage_bucket_object" "job_main" {
  name         = "job/${local.job_version}/main.py"
  bucket       = google_storage_bucket.artifacts.name
  source       = local.job_main_file
  content_type = "text/x-python"

  depends_on = [terraform_data.build]
}

# The warm driver's main file (DRIVER=warm): one batch serving the jobs queued in the bucket's spool.
resource "google_storage_bucket_object" "job_driver" {
  name         = "job/${local.job_version}/driver.py"
  bucket       = google_storage_bucket.artifacts.name
  source       = local.job_driver
  content_type = "text/x-python"

  depends_on = [terraform_data.build]
}

resource "google_storage_bucket_object" "job_package" {
  name         = "job/${local.job_version}/turnstile.zip"
  bucket       = google_storage_bucket.artifacts.name
  source       = local.job_package
  content_type = "application/zip"

  depends_on = [terraform_data.build]
}

# The job's own pydantic and google-cloud-storage (and theirs), installed for the runtime's Python:
# an archive Spark extracts into the folder `turnstile_deps` (the URI's fragment), which the job puts
# first on sys.path (turnstile.spark.dependencies). Compiled wheels cannot be imported from a zip.
resource "google_storage_bucket_object" "job_dependencies" {
  name         = "job/${local.job_version}/deps.zip"
  bucket       = google_storage_bucket.artifacts.name
  source       = local.job_deps
  content_type = "application/zip"

  depends_on = [terraform_data.build]
}

# The Iceberg Spark runtime (Scala 2.13 for runtime 2.x) and the relocated Jackson classes it needs.
resource "google_storage_bucket_object" "job_jars" {
  for_each = local.job_jar_files

  name         = "jars/${substr(filesha256("${local.build_dir}/job/jars/${each.value}"), 0, 16)}/${each.value}"
  bucket       = google_storage_bucket.artifacts.name
  source       = "${local.build_dir}/job/jars/${each.value}"
  content_type = "application/java-archive"

  depends_on = [terraform_data.build]
}

# Images of the functions, built by Cloud Build with the build service account (iam.tf).
resource "google_artifact_registry_repository" "functions" {
  #checkov:skip=CKV_GCP_84:The repository holds only the functions' build images (this repository's code and public PyPI packages), no data; Google-managed encryption is enough. The data buckets take var.kms_key_name.
  project       = var.project_id
  location      = var.region
  repository_id = "${var.name}-functions"
  description   = "Images of the turnstile functions"
  format        = "DOCKER"
  labels        = local.labels

  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 5
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      older_than = "2592000s"
    }
  }

  depends_on = [google_project_service.apis]
}
