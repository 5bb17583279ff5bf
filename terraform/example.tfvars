# Example inputs: copy to prod.tfvars and edit, then pass -var-file=prod.tfvars to plan and destroy
# (docs/DEPLOY.md walks through a deployment); variables.tf documents every input and its default.

project_id = "my-data-project"
region     = "europe-west1"
name       = "turnstile"

labels = {
  team = "data-platform"
}

# Buckets default to <project_id>-<name>-inbound / -artifacts / -warehouse.
# inbound_bucket_name = "acme-landing"
# kms_key_name        = "projects/my-data-project/locations/europe-west1/keyRings/data/cryptoKeys/landing"

# Tables whose rejected rows (_failed/) are deleted after failed_rows_retention_days.
table_prefixes             = ["sales/orders", "sales/customers"]
failed_rows_retention_days = 90
job_record_retention_days  = 30

# Who runs the turnstile CLI: status, unlock, ..., and retry/backfill/cancel, which submit and
# cancel Dataproc batches as the batch service account (docs/DEPLOY.md, Operator access).
operator_members = ["group:data-oncall@example.com"]

# Protocol settings (docs/CONFIGURATION.md).
order_per_table         = false
start_backfill_filename = "_HISTORYDONE"

# Dataproc Serverless.
dataproc_runtime_version = "2.2"
# dataproc_subnetwork    = "projects/my-data-project/regions/europe-west1/subnetworks/dataproc"
dataproc_properties = {
  "spark.executor.instances"             = "2"
  "spark.dynamicAllocation.maxExecutors" = "10"
}

# Iceberg catalog: BigLake metastore, tables as turnstile.<dataset>.<table>.
iceberg_catalog      = "turnstile"
iceberg_catalog_type = "biglake"

# Alerts: ids of existing Monitoring notification channels.
notification_channels = ["projects/my-data-project/notificationChannels/1234567890"]
