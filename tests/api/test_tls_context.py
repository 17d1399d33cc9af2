"""Every client of a process shares one verified TLS context: loading the CA bundle is done once."""

from __future__ import annotations

import ssl

import pytest

from resources.api.client import VisibilityClient
from resources.api.transport import tls_context


def test_the_shared_context_verifies_certificates_and_host_names() -> None:
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0  # the CA bundle is loaded


def test_every_client_uses_the_one_context(monkeypatch: pytest.MonkeyPatch) -> None:
    tls_context()  # made once, before the clients
    made: list[object] = []
    original = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(1) or original(*a, **k))
    for _ in range(3):
        VisibilityClient("https://api.example.com", "k" * 32).close()
    assert made == []
