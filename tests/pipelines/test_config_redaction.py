"""Credentials in URLs stay out of configuration errors and of the settings' repr."""

from __future__ import annotations

import pytest

from pipelines.config import ConfigError, load_settings

KEY = "vsk_d26325e194ea80c4f2d86c45814c5d23"


@pytest.mark.parametrize(
    "url",
    [
        "http://svc:hunter2@api.example.com",  # plain http to a remote host
        "ftp://svc:hunter2@api.example.com",  # not http(s)
        "https://svc:hunter2@api.example.com",  # credentials in the URL at all
    ],
)
def test_a_bad_api_url_is_reported_without_its_password(url: str) -> None:
    with pytest.raises(ConfigError, match="VISIBILITY_API_URL") as caught:
        load_settings({"VISIBILITY_API_URL": url})
    assert "hunter2" not in str(caught.value)


def test_the_settings_repr_shows_neither_the_key_nor_a_warehouse_password() -> None:
    settings = load_settings(
        {
            "VISIBILITY_API_URL": "https://api.example.com",
            "VISIBILITY_API_KEY": KEY,
            "VISIBILITY_WAREHOUSE": "postgresql://loader:s3cr%2Ft@db.internal:5432/analytics",
        }
    )
    text = repr(settings)
    assert KEY not in text
    assert "s3cr" not in text
    assert "postgresql://loader:***@db.internal:5432/analytics" in text
    assert "https://api.example.com" in text
