"""resources/warehouse."""
