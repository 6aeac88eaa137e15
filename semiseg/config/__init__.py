"""The configuration: schema (the sections as dataclasses, their defaults) and load (YAML
-> a validated Config, overrides, saving)."""
