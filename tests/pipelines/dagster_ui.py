"""One run launched as the UI's *Materialize* launches it (a selection of one job's assets, one
partition), and the asset page's newest materialization: for the tests that drive the webserver."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.daemon import FROM_UI_TAG, DagsterStack

PARTITION_TAG = "dagster/partition"


def ui_run_params(
    stack: DagsterStack, job: str, assets: Sequence[str], partition: str | None = None
) -> dict[str, Any]:
    """``executionParams`` of *Materialize* on ``assets`` (keys ``a/b``) of ``job``: the asset
    selection, no config, the UI's tag and, for partitioned assets, the partition picked
    (``dagster/partition``, e.g. ``2026-10-31|chatgpt``)."""
    tags = [FROM_UI_TAG, *([{"key": PARTITION_TAG, "value": partition}] if partition else [])]
    return {
        "selector": {
            **stack.repository_selector,
            "pipelineName": job,
            "assetSelection": [{"path": key.split("/")} for key in assets],
            "assetCheckSelection": [],
        },
        "mode": "default",
        "runConfigData": {},
        "executionMetadata": {"tags": tags},
    }


def launch_run(stack: DagsterStack, params: Mapping[str, Any]) -> str:
    """``launchPipelineExecution`` (the UI's launch of one run); the run id, or GraphQLError."""
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION as LAUNCH_RUN_MUTATION

    variables = {"executionParams": dict(params)}
    outcome = stack.answer(LAUNCH_RUN_MUTATION, variables, "launchPipelineExecution", "LaunchRunSuccess")
    return str(outcome["run"]["runId"])


MATERIALIZATIONS_QUERY = """
query AssetMaterializations($assetKey: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset {
      assetMaterializations(limit: 1, partitions: $partitions) {
        runId
        partition
        metadataEntries {
          label
          __typename
          ... on MarkdownMetadataEntry { mdStr }
          ... on PathMetadataEntry { path }
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
          ... on FloatMetadataEntry { floatValue }
          ... on JsonMetadataEntry { jsonString }
        }
      }
    }
    ... on AssetNotFoundError { message }
  }
}
"""


def latest_materialization(
    stack: DagsterStack, asset: str, partition: str | None = None
) -> dict[str, Any] | None:
    """The newest materialization of ``asset`` (of ``partition`` when given) as the asset page's
    events show it: ``runId``, ``partition`` and ``metadata`` (label -> value); None if none yet."""
    variables: dict[str, Any] = {"assetKey": {"path": asset.split("/")}}
    if partition is not None:
        variables["partitions"] = [partition]
    data = stack.graphql(MATERIALIZATIONS_QUERY, variables)["assetOrError"]
    if data["__typename"] != "Asset" or not data["assetMaterializations"]:
        return None
    event = data["assetMaterializations"][0]
    values = ("mdStr", "path", "text", "intValue", "floatValue", "jsonString")
    metadata = {
        entry["label"]: next((entry[v] for v in values if entry.get(v) is not None), None)
        for entry in event["metadataEntries"]
    }
    return {"runId": event["runId"], "partition": event["partition"], "metadata": metadata}
