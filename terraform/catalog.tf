# The Iceberg catalog, BigLake metastore by default.
#
# biglake: Google's BigLake Iceberg catalog plugin (var.biglake_catalog_jar_uri, staged with every
#   batch) keeps tables in a BigLake metastore catalog named var.iceberg_catalog in the Dataproc
#   region; the library sets catalog-impl=org.apache.iceberg.gcp.biglake.BigLakeCatalog with
#   gcp_project, gcp_location, blms_catalog and warehouse (turnstile.jobs.dataproc.catalog_properties).
#   Terraform creates that catalog so the batches only need biglake.catalogs.get on it.
# rest: the BigLake metastore Iceberg REST catalog. Its catalog for the warehouse bucket is created
#   once with `gcloud biglake iceberg catalogs create BUCKET --catalog-type=gcs-bucket` (docs/DEPLOY.md);
#   the batches need the iceberg-gcp-bundle jar (GoogleAuthManager) through var.extra_jar_uris.

resource "google_biglake_catalog" "tables" {
  count = var.iceberg_catalog_type == "biglake" ? 1 : 0

  project  = var.project_id
  name     = var.iceberg_catalog
  location = local.dataproc_region

  depends_on = [google_project_service.apis]
}
