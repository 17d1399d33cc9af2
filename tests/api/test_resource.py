"""The Dagster resource: settings validated up front, the key from EnvVar and never shown."""

# No `from __future__ import annotations`: Dagster reads the asset annotations at definition time.

import logging
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from resources.api.errors import ConfigurationError
from resources.api.resource import VisibilityAPIResource
from sandbox.testing import SandboxHandle


def test_resource_materializes_with_the_key_from_envvar_and_never_shows_it(
    sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    assert_no_key: Callable[..., None],
) -> None:
    key = sandbox.keys["workspace"]
    monkeypatch.setenv("VISIBILITY_API_KEY", key)
    seen: list[str] = []

    @dg.asset
    def brand_count(context: dg.AssetExecutionContext, api: VisibilityAPIResource) -> int:
        seen.append(repr(api))
        context.log.info(f"using {api!r}")
        with api.get_client() as client:
            count = len(list(client.list_brands()))
            context.add_output_metadata({"api_requests": client.stats.to_metadata()})
        return count

    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=dg.EnvVar("VISIBILITY_API_KEY"))
    with caplog.at_level(logging.DEBUG):
        result = dg.materialize([brand_count], resources={"api": resource})
    assert result.success
    assert result.output_for_node("brand_count") == 3
    metadata = result.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["api_requests"].value["requests_by_endpoint"] == {"GET /v1/brands": 1}
    assert seen and "[hidden]" in seen[0]
    events = [str(event) for event in result.all_events]
    assert_no_key(sandbox.keys, repr(resource), str(resource), *seen, *events, caplog.text, str(metadata))


def test_resolved_resource_masks_the_key_in_repr_and_str() -> None:
    resource = VisibilityAPIResource(api_url="https://api.example.com", api_key="vk_live_abcdef123")
    for text in (repr(resource), str(resource), f"{resource}"):
        assert "vk_live_abcdef123" not in text and "[hidden]" in text


@pytest.mark.parametrize(
    ("url", "key", "setting"),
    [
        ("http://api.example.com", "vk_live_abcdef123", "VISIBILITY_API_URL"),
        ("ftp://api.example.com", "vk_live_abcdef123", "VISIBILITY_API_URL"),
        ("https://api.example.com", "", "VISIBILITY_API_KEY"),
        ("https://api.example.com", "Bearer vk_live_abcdef123", "VISIBILITY_API_KEY"),
    ],
)
def test_get_client_validates_settings_and_names_the_one_to_fix(url: str, key: str, setting: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        VisibilityAPIResource(api_url=url, api_key=key).get_client()
    assert setting in str(caught.value)
    assert "vk_live_abcdef123" not in str(caught.value)


def test_loopback_http_is_accepted_for_the_sandbox(sandbox: SandboxHandle) -> None:
    resource = VisibilityAPIResource(
        api_url=sandbox.url, api_key=sandbox.keys["workspace"], max_concurrency=3
    )
    with resource.get_client() as client:
        assert client.base_url == sandbox.url
        assert client.budget.snapshot().concurrency_limit == 3


def test_runs_given_one_resource_object_share_its_budget_and_configured_runs_get_one_each(
    sandbox: SandboxHandle,
) -> None:
    """The command line hands Dagster its resource as is, so its runs share one budget; a configured
    resource (the code location's) is built anew for each run, with a budget of its own."""
    key = sandbox.keys["workspace"]
    budgets: list[object] = []

    @dg.asset
    def budget_seen(api: VisibilityAPIResource) -> None:
        with api.get_client() as client:
            budgets.append(client.budget)

    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=key)

    def run(given: object) -> None:
        assert dg.materialize([budget_seen], resources={"api": given}).success

    as_is = dg.ResourceDefinition.hardcoded_resource(resource)
    run(as_is)
    run(as_is)
    run(resource)  # configured: Dagster makes a copy for the run, which sets up its own budget
    run(resource)

    shared = resource.get_budget()
    assert budgets[:2] == [shared, shared]
    assert budgets[2] is not shared and budgets[3] is not shared and budgets[2] is not budgets[3]


def test_a_run_of_the_api_resource_leaves_nothing_in_the_temp_directory(
    sandbox: SandboxHandle, private_tmp: Path
) -> None:
    """Nothing of the key is kept on disk: clients of one key pace from its headers alone."""
    seen: list[VisibilityAPIResource] = []

    @dg.asset
    def no_request(api: VisibilityAPIResource) -> None:
        seen.append(api)

    resource = VisibilityAPIResource(api_url=sandbox.url, api_key=sandbox.keys["workspace"])
    assert dg.materialize([no_request], resources={"api": resource}).success
    assert seen and seen[0] is not resource  # the run's own copy
    assert sorted(private_tmp.iterdir()) == []

    @dg.asset
    def one_request(api: VisibilityAPIResource) -> None:
        with api.get_client() as client:
            list(client.list_brands())

    assert dg.materialize([one_request], resources={"api": resource}).success
    assert sorted(private_tmp.iterdir()) == []


def test_a_launchpad_value_out_of_range_fails_the_run_naming_the_field_before_any_request(
    sandbox: SandboxHandle,
) -> None:
    sandbox.reset_stats()

    @dg.asset
    def one_request(api: VisibilityAPIResource) -> None:
        with api.get_client() as client:
            list(client.list_brands())

    key = sandbox.keys["workspace"]
    edited = {"api_url": sandbox.url, "api_key": key, "retry_deadline_seconds": 0}
    result = dg.materialize(
        [one_request],
        resources={"api": VisibilityAPIResource.configure_at_launch()},
        run_config={"resources": {"api": {"config": edited}}},
        raise_on_error=False,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_failure)
    error = str(failure.event_specific_data.error)  # the resource's own check, as the run starts
    assert "retry_deadline_seconds" in error and "greater than 0" in error
    assert key not in error
    assert sandbox.stats() == {}
