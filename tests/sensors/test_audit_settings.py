"""The audit sensor's configuration: environment parsing and which brand a configured URL belongs to."""

from __future__ import annotations

import datetime as dt

import pytest

from pipelines.sensors.audits import AuditSensorSettings, configured_candidates

DOMAINS = {"b-acme": "acme.com", "b-www": "www.zeta.io"}


def test_settings_come_from_the_environment_with_defaults() -> None:
    settings = AuditSensorSettings.from_env(
        {
            "VISIBILITY_AUDIT_URLS": "https://acme.com/a, https://acme.com/b\nhttps://zeta.io/",
            "VISIBILITY_AUDITS_PER_DAY": "3",
            "VISIBILITY_AUDIT_DEADLINE_MINUTES": "45",
        }
    )
    assert settings.urls == ["https://acme.com/a", "https://acme.com/b", "https://zeta.io/"]
    assert (settings.audits_per_day, settings.deadline) == (3, dt.timedelta(minutes=45))
    assert settings.reaudit_interval == dt.timedelta(days=30)  # default


def test_malformed_setting_names_the_variable() -> None:
    with pytest.raises(ValueError, match="VISIBILITY_AUDITS_PER_DAY"):
        AuditSensorSettings.from_env({"VISIBILITY_AUDITS_PER_DAY": "ten"})


def test_the_code_location_reads_the_audit_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pipelines.definitions import build_definitions
    from settings import load_settings

    monkeypatch.setenv("VISIBILITY_AUDIT_URLS", "https://acme.com/x")
    resources = build_definitions(load_settings(env={})).resources or {}
    assert resources["audit_settings"].urls == ["https://acme.com/x"]


def test_configured_url_belongs_to_the_brand_whose_domain_hosts_it() -> None:
    found, orphans = configured_candidates(
        [
            "https://acme.com/pricing",
            "https://blog.acme.com/post",
            "https://zeta.io/",  # the brand's domain is given with www.
            "https://notacme.com/x",  # a suffix is not a subdomain
            "https://other.example/",
        ],
        DOMAINS,
    )
    assert [(c.url, c.brand_id, c.reason) for c in found] == [
        ("https://acme.com/pricing", "b-acme", "configured"),
        ("https://blog.acme.com/post", "b-acme", "configured"),
        ("https://zeta.io/", "b-www", "configured"),
    ]
    assert orphans == ["https://notacme.com/x", "https://other.example/"]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("VISIBILITY_AUDITS_PER_DAY", "ten"),
        ("VISIBILITY_AUDITS_PER_DAY", "-5"),
        ("VISIBILITY_AUDITS_PER_DAY", "2.5"),
        ("VISIBILITY_AUDIT_DEADLINE_MINUTES", "-1"),
        ("VISIBILITY_AUDIT_DEADLINE_MINUTES", "0"),
        ("VISIBILITY_AUDIT_DEADLINE_MINUTES", "nan"),
        ("VISIBILITY_AUDIT_REAUDIT_DAYS", "-0.5"),
        ("VISIBILITY_AUDIT_NEW_PAGE_DAYS", "-1"),
    ],
)
def test_a_malformed_or_negative_setting_is_a_config_error_naming_the_variable(
    variable: str, value: str
) -> None:
    from settings import ConfigError

    with pytest.raises(ConfigError, match=variable):
        AuditSensorSettings.from_env({variable: value})


def test_zero_audits_per_day_is_allowed_and_turns_submissions_off() -> None:
    assert AuditSensorSettings.from_env({"VISIBILITY_AUDITS_PER_DAY": "0"}).audits_per_day == 0
