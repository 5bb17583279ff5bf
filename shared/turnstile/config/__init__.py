"""Configuration: the `_config/` cascade and its cache, load.json as typed values (reading, field
mapping, lineage keys), and the settings read from the environment."""
