"""Object store port and its adapters (GCS, in-memory)."""

from turnstile.store.port import ObjectInfo, ObjectStore, StoredObject

__all__ = ["ObjectInfo", "ObjectStore", "StoredObject"]
