terraform {
  required_version = ">= 1.5.0"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 6.x and 7.x both carry every resource and argument used here (build_config.service_account,
      # docker_repository, evaluation_missing_data, google_biglake_catalog).
      version = ">= 6.0, < 8.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
