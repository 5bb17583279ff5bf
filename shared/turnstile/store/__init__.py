"""Object store port and its adapters (GCS, S3, in-memory)."""

from turnstile.store.port import ObjectInfo, ObjectStore, StoredObject, object_uri

__all__ = ["ObjectInfo", "ObjectStore", "StoredObject", "object_uri"]
