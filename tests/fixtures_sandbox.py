"""Fixtures that start the real sandbox on loopback (owned by the sandbox work)."""
