# Service accounts and every grant, least privilege. Only additive *_iam_member resources (never
# authoritative bindings or policies); no basic roles; storage access is granted per bucket, never
# project-wide, by no role (a predefined role's permissions included). tests/terraform checks every
# role here against an allow-list, and resolves each grant to its permissions
# (tests/terraform/fixtures/predefined_roles.json for predefined roles) to check what each
# principal may do, directly or by acting as another service account.
#
#   <name>-fn       runs both functions: objects of the inbound bucket but _config/, the state
#                   bucket, create/get/cancel Dataproc batches, act as <name>-batch (and as no
#                   other service account)
#   <name>-batch    runs the Dataproc batches: Dataproc Worker's permissions but storage (a custom
#                   role), per bucket: read the inbound and state buckets and write only job outputs
#                   there, the warehouse, the artifacts (read), its staging bucket; the catalog
#   <name>-trigger  Eventarc's identity: receives the bucket's events, invokes <name>-events
#   <name>-sched    Cloud Scheduler's OIDC identity: invokes <name>-sweeper
#   <name>-build    Cloud Build's identity when it builds the functions' images

resource "google_service_account" "functions" {
  project      = var.project_id
  account_id   = "${var.name}-fn"
  display_name = "turnstile functions (${var.name})"
  description  = "Runs the turnstile event and sweeper functions."
}

resource "google_service_account" "batch" {
  project      = var.project_id
  account_id   = "${var.name}-batch"
  display_name = "turnstile Dataproc batches (${var.name})"
  description  = "Identity of the Dataproc Serverless batches that apply batches to Iceberg tables."
}

resource "google_service_account" "trigger" {
  project      = var.project_id
  account_id   = "${var.name}-trigger"
  display_name = "turnstile Eventarc trigger (${var.name})"
  description  = "Delivers the inbound bucket's object events to the event function."
}

resource "google_service_account" "scheduler" {
  project      = var.project_id
  account_id   = "${var.name}-sched"
  display_name = "turnstile sweeper schedule (${var.name})"
  description  = "Cloud Scheduler's OIDC identity for calling the sweeper."
}

resource "google_service_account" "build" {
  project      = var.project_id
  account_id   = "${var.name}-build"
  display_name = "turnstile function builds (${var.name})"
  description  = "Cloud Build identity for building the turnstile functions' images."
}

# -- the inbound bucket's IAM conditions ---------------------------------------------------------------

# Grants on the inbound bucket are narrowed with IAM conditions (uniform bucket-level access makes
# them apply). The table prefix varies, so a condition looks for a folder anywhere in the object's
# name (`extract` returns "" when the template's prefix does not occur; the bucket part of the name
# cannot contain "/", and "/objects/_config/x" matches "/_config/" too, so bucket-level folders are
# covered).
#   not_a_config  anything but a _config/ file: transforms and load configs are reviewed changes,
#                 which neither the functions nor the operators overwrite or delete
#   is_job_output what a batch writes: result records (_turnstile/results/), its done signal
#                 (_turnstile/jobs/*.done) and rejected rows (_failed/); never a manifest, a lock,
#                 a backlog pointer, a claim or upstream data (with not_a_config: nor such a
#                 folder nested in a _config/ folder); and the warm drivers' spool at the
#                 bucket's root (_turnstile/driver/: requests, job and driver records), which a
#                 driver batch claims, records and removes (docs/DRIVER.md)
locals {
  inbound_objects   = "projects/_/buckets/${google_storage_bucket.inbound.name}/objects/"
  is_inbound_object = "resource.type == \"storage.googleapis.com/Object\" && resource.name.startsWith(\"${local.inbound_objects}\")"
  not_a_config      = "resource.name.extract(\"/_config/{rest}\") == \"\""
  is_job_output     = "(resource.name.extract(\"/_turnstile/results/{rest}\") != \"\" || (resource.name.extract(\"/_turnstile/jobs/{rest}\") != \"\" && resource.name.endsWith(\".done\")) || resource.name.extract(\"/_failed/{rest}\") != \"\" || resource.name.extract(\"/objects/_turnstile/driver/{rest}\") != \"\")"
}

# -- the functions ------------------------------------------------------------------------------------

# Read every object of the inbound bucket (batches, _config/, state objects)...
resource "google_storage_bucket_iam_member" "functions_inbound" {
  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.functions.member
}

# ...and create, overwrite and delete what the protocol writes (locks, _BACKFILL, claims beside the
# batches, pointers, manifests, records) across every table's folders, so only _config/ is left out:
# the functions read configs and never write one.
resource "google_storage_bucket_iam_member" "functions_inbound_writes" {
  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectUser"
  member = google_service_account.functions.member

  condition {
    title       = "everything but _config/"
    description = "State objects, claims, pointers, manifests and records; never a _config/ file."
    expression  = "${local.is_inbound_object} && ${local.not_a_config}"
  }
}

# The state bucket holds turnstile's objects only (no _config/, no upstream data): the functions
# read and write it whole.
resource "google_storage_bucket_iam_member" "functions_state" {
  count = var.separate_state_bucket ? 1 : 0

  bucket = google_storage_bucket.state[0].name
  role   = "roles/storage.objectUser"
  member = google_service_account.functions.member
}

# Create, get and cancel Dataproc batches, nothing else: roles/dataproc.editor would also let the
# functions delete batches, manage clusters and workflow templates, so a custom role with the
# permissions DataprocRunner uses instead: CreateBatch, GetBatch, and CancelOperation on the batch's
# operation (`cancel`), which needs dataproc.operations.cancel.
resource "google_project_iam_custom_role" "batch_submitter" {
  project     = var.project_id
  role_id     = "${replace(var.name, "-", "_")}_batch_submitter"
  title       = "turnstile batch submitter (${var.name})"
  description = "Create, read and cancel Dataproc Serverless batches; nothing else."
  permissions = [
    "dataproc.batches.cancel",
    "dataproc.batches.create",
    "dataproc.batches.get",
    "dataproc.operations.cancel",
  ]
}

resource "google_project_iam_member" "functions_batch_submitter" {
  project = var.project_id
  role    = google_project_iam_custom_role.batch_submitter.id
  member  = google_service_account.functions.member
}

# CreateBatch with DATAPROC_SERVICE_ACCOUNT needs actAs on that service account: granted on the batch
# service account alone, never project-wide.
resource "google_service_account_iam_member" "functions_act_as_batch" {
  service_account_id = google_service_account.batch.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.functions.member
}

# -- the Dataproc batches -----------------------------------------------------------------------------

# Google requires a Serverless batch's service account to hold Dataproc Worker (the agent's calls,
# node pools, logs, metrics), but that role also carries storage.objects.create, delete and the
# rest project-wide: every object of every bucket in the project, whatever the conditional grants
# below say (IAM is additive), and to anyone who submits a batch as this account (the functions,
# the operators). So a custom role holds Dataproc Worker's permissions but storage.*, and storage is
# granted per bucket below, the staging bucket included (DATAPROC_STAGING_BUCKET: otherwise Dataproc
# uses project-level staging and temp buckets of its own naming). The list is
# `gcloud iam roles describe roles/dataproc.worker` without storage.*; tests/terraform compares it
# with fixtures/predefined_roles.json, to refresh when Google changes the role (docs/DEPLOY.md).
resource "google_project_iam_custom_role" "batch_worker" {
  project     = var.project_id
  role_id     = "${replace(var.name, "-", "_")}_batch_worker"
  title       = "turnstile batch worker (${var.name})"
  description = "Dataproc Worker without its project-wide Cloud Storage permissions: storage is granted per bucket."
  permissions = [
    "cloudprofiler.profiles.create",
    "cloudprofiler.profiles.update",
    "datalineage.locations.processOpenLineageMessage",
    "dataproc.agents.create",
    "dataproc.agents.delete",
    "dataproc.agents.get",
    "dataproc.agents.list",
    "dataproc.agents.update",
    "dataproc.batches.computeTuningConfig",
    "dataproc.batches.sparkApplicationWrite",
    "dataproc.sessions.sparkApplicationWrite",
    "dataproc.tasks.lease",
    "dataproc.tasks.listInvalidatedLeases",
    "dataproc.tasks.reportStatus",
    "dataprocrm.nodePools.create",
    "dataprocrm.nodePools.delete",
    "dataprocrm.nodePools.deleteNodes",
    "dataprocrm.nodePools.get",
    "dataprocrm.nodePools.list",
    "dataprocrm.nodePools.resize",
    "dataprocrm.nodes.get",
    "dataprocrm.nodes.heartbeat",
    "dataprocrm.nodes.list",
    "dataprocrm.nodes.mintOAuthToken",
    "dataprocrm.operations.get",
    "logging.logEntries.create",
    "logging.logEntries.route",
    "monitoring.metricDescriptors.create",
    "monitoring.metricDescriptors.get",
    "monitoring.metricDescriptors.list",
    "monitoring.monitoredResourceDescriptors.get",
    "monitoring.monitoredResourceDescriptors.list",
    "monitoring.timeSeries.create",
  ]
}

resource "google_project_iam_member" "batch_worker" {
  project = var.project_id
  role    = google_project_iam_custom_role.batch_worker.id
  member  = google_service_account.batch.member
}

# The inbound bucket: the batches read everything (data files, manifests, _config/) and may create
# or overwrite only what a job writes (local.is_job_output). Overwriting an object needs
# storage.objects.delete, hence objectUser, but only there: upstream data, _bqlock, _BACKFILL,
# _config/, the backlog, claims and manifests are out of the batches' reach.
resource "google_storage_bucket_iam_member" "batch_inbound" {
  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.batch.member
}

resource "google_storage_bucket_iam_member" "batch_inbound_results" {
  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectUser"
  member = google_service_account.batch.member

  condition {
    title       = "turnstile job outputs only"
    description = "Result records (_turnstile/results/), done signals (_turnstile/jobs/*.done), rejected rows (_failed/), the drivers' spool (_turnstile/driver/)."
    expression  = "${local.is_inbound_object} && ${local.not_a_config} && ${local.is_job_output}"
  }
}

# The state bucket, likewise: the batches read their manifests there and write their result
# records; the locks, the backlog pointers, the claims and the manifests stay the functions' and
# the operators' to write.
resource "google_storage_bucket_iam_member" "batch_state" {
  count = var.separate_state_bucket ? 1 : 0

  bucket = google_storage_bucket.state[0].name
  role   = "roles/storage.objectViewer"
  member = google_service_account.batch.member
}

resource "google_storage_bucket_iam_member" "batch_state_results" {
  count = var.separate_state_bucket ? 1 : 0

  bucket = google_storage_bucket.state[0].name
  role   = "roles/storage.objectUser"
  member = google_service_account.batch.member

  condition {
    title       = "turnstile job outputs only"
    description = "Result records (_turnstile/results/), the drivers' spool (_turnstile/driver/); never a lock, a backlog pointer, a claim or a manifest."
    expression  = "resource.type == \"storage.googleapis.com/Object\" && resource.name.startsWith(\"projects/_/buckets/${google_storage_bucket.state[0].name}/objects/\") && ${local.not_a_config} && ${local.is_job_output}"
  }
}

# Iceberg data and metadata files: create, read, delete (snapshot expiry).
resource "google_storage_bucket_iam_member" "batch_warehouse" {
  bucket = google_storage_bucket.warehouse.name
  role   = "roles/storage.objectUser"
  member = google_service_account.batch.member
}

# The job's main file, the turnstile package and the jars: read only.
resource "google_storage_bucket_iam_member" "batch_artifacts" {
  bucket = google_storage_bucket.artifacts.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.batch.member
}

# The batches' staging bucket: theirs alone (staged files, driver output, Spark history).
resource "google_storage_bucket_iam_member" "batch_dataproc_staging" {
  bucket = google_storage_bucket.dataproc_staging.name
  role   = "roles/storage.objectUser"
  member = google_service_account.batch.member
}

# storage.buckets.get came with Dataproc Worker project-wide: the Cloud Storage connector reads a
# bucket's metadata (a path at a bucket's root, directory checks) and Dataproc checks the staging
# bucket's. Granted on each bucket the batches use, with objects.list (which each already has).
resource "google_storage_bucket_iam_member" "batch_bucket_metadata" {
  for_each = toset(concat(
    [
      google_storage_bucket.inbound.name,
      google_storage_bucket.warehouse.name,
      google_storage_bucket.artifacts.name,
      google_storage_bucket.dataproc_staging.name,
    ],
    google_storage_bucket.state[*].name,
  ))

  bucket = each.value
  role   = "roles/storage.legacyBucketReader"
  member = google_service_account.batch.member
}

# The catalog. roles/biglake.admin would do, but it also grants deleting catalogs and setting IAM
# policies; roles/biglake.editor lacks the databases.* permissions the BigLake catalog plugin uses.
# So a custom role with what committing to tables needs: read the catalog, create and read
# namespaces (CREATE NAMESPACE IF NOT EXISTS), create, read and update tables (each commit swaps the
# metadata pointer). The REST catalog type also needs serviceusage.services.use on the project named
# in the x-goog-user-project header.
locals {
  catalog_permissions = var.iceberg_catalog_type == "rest" ? [
    "biglake.catalogs.get",
    "biglake.namespaces.create",
    "biglake.namespaces.get",
    "biglake.namespaces.list",
    "biglake.tables.create",
    "biglake.tables.get",
    "biglake.tables.list",
    "biglake.tables.update",
    "serviceusage.services.use",
    ] : [
    "biglake.catalogs.get",
    "biglake.databases.create",
    "biglake.databases.get",
    "biglake.databases.list",
    "biglake.tables.create",
    "biglake.tables.get",
    "biglake.tables.list",
    "biglake.tables.update",
  ]
}

resource "google_project_iam_custom_role" "catalog_writer" {
  project     = var.project_id
  role_id     = "${replace(var.name, "-", "_")}_catalog_writer"
  title       = "turnstile Iceberg catalog writer (${var.name})"
  description = "Create namespaces and tables and commit to them in the BigLake metastore."
  permissions = sort(distinct(concat(local.catalog_permissions, var.catalog_extra_permissions)))
}

resource "google_project_iam_member" "batch_catalog" {
  project = var.project_id
  role    = google_project_iam_custom_role.catalog_writer.id
  member  = google_service_account.batch.member
}

# -- event delivery -----------------------------------------------------------------------------------

# Cloud Storage publishes the bucket's object events to the Pub/Sub topic Eventarc manages; that
# topic is created by Eventarc, so the grant is on the project (as Google documents it).
resource "google_project_iam_member" "gcs_agent_publisher" {
  project = var.project_id
  role    = "roles/pubsub.publisher"
  member  = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}

# The trigger's service account receives events (project-level role, the only level it exists at)...
resource "google_project_iam_member" "trigger_receiver" {
  project = var.project_id
  role    = "roles/eventarc.eventReceiver"
  member  = google_service_account.trigger.member
}

# ...and invokes the event function's Cloud Run service, that service only.
resource "google_cloud_run_service_iam_member" "trigger_invokes_events" {
  project  = var.project_id
  location = google_cloudfunctions2_function.events.location
  service  = google_cloudfunctions2_function.events.name
  role     = "roles/run.invoker"
  member   = google_service_account.trigger.member
}

# Cloud Scheduler's OIDC identity invokes the sweeper's Cloud Run service only.
resource "google_cloud_run_service_iam_member" "scheduler_invokes_sweeper" {
  project  = var.project_id
  location = google_cloudfunctions2_function.sweeper.location
  service  = google_cloudfunctions2_function.sweeper.name
  role     = "roles/run.invoker"
  member   = google_service_account.scheduler.member
}

# -- building the functions ---------------------------------------------------------------------------

resource "google_project_iam_member" "build_logs" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = google_service_account.build.member
}

resource "google_artifact_registry_repository_iam_member" "build_pushes_images" {
  project    = var.project_id
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = google_service_account.build.member
}

# Reads the function source archive.
resource "google_storage_bucket_iam_member" "build_reads_source" {
  bucket = google_storage_bucket.artifacts.name
  role   = "roles/storage.objectViewer"
  member = google_service_account.build.member
}

# -- people and keys ----------------------------------------------------------------------------------

# Operators (var.operator_members) read everything (turnstile status, history) and write what the
# CLI writes: _bqlock (unlock), _BACKFILL (backfill), uploads (put). They may not delete or overwrite
# _config/ files (those are reviewed changes), only create new ones; objectUser elsewhere also lets
# them delete upstream data, which `put` needs to replace a batch. Three grants, the writes narrowed
# by conditions.
resource "google_storage_bucket_iam_member" "operators_inbound" {
  for_each = toset(var.operator_members)

  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectViewer"
  member = each.value
}

resource "google_storage_bucket_iam_member" "operators_inbound_writes" {
  for_each = toset(var.operator_members)

  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectUser"
  member = each.value

  condition {
    title       = "everything but _config/"
    description = "Locks, _BACKFILL, uploads and their replacement; never an existing _config/ file."
    expression  = "${local.is_inbound_object} && ${local.not_a_config}"
  }
}

resource "google_storage_bucket_iam_member" "operators_inbound_new_configs" {
  for_each = toset(var.operator_members)

  bucket = google_storage_bucket.inbound.name
  role   = "roles/storage.objectCreator"
  member = each.value

  condition {
    title       = "new _config/ files only"
    description = "objectCreator cannot overwrite or delete: creating a table's first config files only."
    expression  = "${local.is_inbound_object} && resource.name.extract(\"/_config/{rest}\") != \"\""
  }
}

# Operators read and write the state bucket as the CLI does (status, unlock, skip, backfill).
resource "google_storage_bucket_iam_member" "operators_state" {
  for_each = var.separate_state_bucket ? toset(var.operator_members) : toset([])

  bucket = google_storage_bucket.state[0].name
  role   = "roles/storage.objectUser"
  member = each.value
}

# `turnstile retry`, `backfill` and `cancel` start and cancel Dataproc batches from the operator's
# machine, as the functions do (with the environment of the operator_job_env_prefix output): the
# functions' own custom role (create, get, cancel batches; nothing else) and actAs on the batch
# service account alone, so the batches run as the functions' do. A batch of an operator's choosing
# has the batch account's rights, so those are the operators' too: job outputs and the warehouse,
# never _config/ or a lock (tests/terraform checks what acting as the batch account reaches).
resource "google_project_iam_member" "operators_batch_submitter" {
  for_each = toset(var.operator_members)

  project = var.project_id
  role    = google_project_iam_custom_role.batch_submitter.id
  member  = each.value
}

resource "google_service_account_iam_member" "operators_act_as_batch" {
  for_each = toset(var.operator_members)

  service_account_id = google_service_account.batch.name
  role               = "roles/iam.serviceAccountUser"
  member             = each.value
}

# With CMEK, the Cloud Storage service agent encrypts and decrypts with the key: on that key only.
resource "google_kms_crypto_key_iam_member" "gcs_agent" {
  count = var.kms_key_name == null ? 0 : 1

  crypto_key_id = var.kms_key_name
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = "serviceAccount:${data.google_storage_project_service_account.gcs.email_address}"
}
