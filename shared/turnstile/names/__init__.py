"""Object names and layouts: paths parsed into typed values, bucket URIs, natural time, where state
objects are placed, which objects are a batch's data, gcs_ocn_bq_ingest's names."""
