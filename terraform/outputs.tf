output "state_bucket" {
  description = "The bucket of turnstile's own objects (separate_state_bucket); empty when they are in the inbound bucket."
  value       = local.state_bucket
}

output "inbound_bucket" {
  description = "The bucket upstream writes batches into."
  value       = google_storage_bucket.inbound.name
}

output "artifacts_bucket" {
  description = "The bucket holding the function source, the job files and the jars."
  value       = google_storage_bucket.artifacts.name
}

output "warehouse" {
  description = "Where the Iceberg tables live (ICEBERG_WAREHOUSE)."
  value       = local.iceberg_warehouse
}

output "event_function" {
  description = "The function Eventarc calls for every object finalized in the inbound bucket."
  value       = google_cloudfunctions2_function.events.name
}

output "sweeper_function" {
  description = "The function Cloud Scheduler calls to sweep the inbound bucket."
  value       = google_cloudfunctions2_function.sweeper.name
}

output "scheduler_job" {
  description = "The Cloud Scheduler job that calls the sweeper."
  value       = google_cloud_scheduler_job.sweep.name
}

output "batch_service_account" {
  description = "The service account the Dataproc batches run as."
  value       = google_service_account.batch.email
}

output "iceberg_catalog" {
  description = "Spark catalog the tables are in: <catalog>.<dataset>.<table>."
  value       = var.iceberg_catalog
}

output "status_command" {
  description = "Shows every table's state (run with credentials that can read the inbound bucket)."
  value       = trimspace("${local.operator_env_prefix} turnstile status gs://${google_storage_bucket.inbound.name}")
}

output "unlock_command" {
  description = "Releases a FAILED lock once its cause is fixed; replace DATASET/TABLE (add --skip-head to drop the failed batch)."
  value       = trimspace("${local.operator_env_prefix} turnstile unlock gs://${google_storage_bucket.inbound.name}/DATASET/TABLE")
}

output "operator_job_env_prefix" {
  description = "Environment for an operator's turnstile retry, backfill and cancel: JOB_RUNNER=dataproc and the functions' job settings (JOB_*, DATAPROC_*, ICEBERG_*), as KEY='VALUE' words; e.g. eval \"export $(terraform -chdir=terraform output -raw operator_job_env_prefix)\". Changes with every new build (the job files' names carry their hash)."
  value       = local.operator_job_env_prefix
}

output "function_environment" {
  description = "The environment both functions run with."
  value       = local.function_env
}
