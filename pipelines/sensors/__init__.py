"""Sensors: URL audits and competitor history backfills (see docs/SENSORS.md)."""
