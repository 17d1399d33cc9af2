"""resources/api."""
