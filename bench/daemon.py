"""The stack a UI user runs, for benchmarks and end-to-end tests: ``dagster-webserver`` and
``dagster-daemon run`` as ``dagster dev`` starts them (the project's ``workspace.yaml``, a temporary
``DAGSTER_HOME`` holding its ``dagster.yaml``), and the GraphQL the UI sends: backfills built as the
*Materialize* dialog builds them (``LaunchAssetExecutionButton`` and
``LaunchAssetChoosePartitionsDialog`` of the installed UI), single runs, schedule dry runs, the
asset page's materializations. Also the planner's minimum of a selection and a comparison of two
DuckDB files. Nothing imports the project at module level: ``code_root`` may be another tree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.processes import (  # noqa: E402, F401  (START_DATE to served: also names of this module)
    START_DATE,
    Service,
    by_endpoint,
    cli_args,
    code_env,
    free_port,
    run_cli,
    served,
    wait_until,
)

FROM_UI_TAG = {"key": "dagster/from_ui", "value": "true"}  # tagsWithUIExecutionTags
BACKFILL_TAG = "dagster/backfill"
TERMINAL_BACKFILL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
TERMINAL_RUN = {"SUCCESS", "FAILURE", "CANCELED"}


# ---------------------------------------------------------------------------------------------
# the Dagster stack


class GraphQLError(RuntimeError):
    pass


class LoadError(Exception):
    """The code location failed to load: no point waiting for it."""


@dataclass
class DagsterStack:
    url: str
    home: Path
    code_root: Path
    env: dict[str, str]
    webserver: Service
    daemon: Service | None = None
    location: str = ""
    repository: str = "__repository__"
    started_seconds: dict[str, float] = field(default_factory=dict)

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None, timeout: float = 120) -> Any:
        response = httpx.post(
            f"{self.url}/graphql", json={"query": query, "variables": dict(variables or {})}, timeout=timeout
        )
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise GraphQLError(str(body["errors"])[:2000])
        return body["data"]

    def answer(self, query: str, variables: Mapping[str, Any], field: str, typename: str) -> Any:
        """The ``field`` of the answer, or :class:`GraphQLError` when it is not a ``typename``."""
        outcome = self.graphql(query, variables)[field]
        if outcome["__typename"] != typename:
            raise GraphQLError(f"{field}: {outcome}")
        return outcome

    @property
    def repository_selector(self) -> dict[str, str]:
        return {"repositoryLocationName": self.location, "repositoryName": self.repository}

    @property
    def services(self) -> list[Service]:
        return [s for s in (self.webserver, self.daemon) if s is not None]


WORKSPACE_QUERY = """
query Workspace {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError {
          __typename
          ... on RepositoryLocation { repositories { name } }
          ... on PythonError { message }
        }
      }
    }
  }
}
"""

DAEMON_HEALTH_QUERY = """
query DaemonHealth {
  instance { daemonHealth { allDaemonStatuses { daemonType healthy } } }
}
"""

SENSORS_QUERY = """
query Sensors($repositorySelector: RepositorySelector!) {
  sensorsOrError(repositorySelector: $repositorySelector) {
    __typename
    ... on Sensors { results { name sensorState { id status } } }
  }
}
"""

STOP_SENSOR_MUTATION = """
mutation StopRunningSensor($id: String!) {
  stopSensor(id: $id) {
    __typename
    ... on PythonError { message }
  }
}
"""


def _location_loaded(stack: DagsterStack) -> bool:
    data = stack.graphql(WORKSPACE_QUERY)["workspaceOrError"]
    entries = data.get("locationEntries") or []
    if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
        return False
    entry = entries[0]
    loaded = entry["locationOrLoadError"]
    if loaded["__typename"] == "PythonError":
        raise LoadError(f"code location {entry['name']} failed to load:\n{loaded['message']}")
    stack.location = entry["name"]
    stack.repository = loaded["repositories"][0]["name"]
    return True


def _daemon_ready(stack: DagsterStack, needed: Sequence[str]) -> bool:
    statuses = stack.graphql(DAEMON_HEALTH_QUERY)["instance"]["daemonHealth"]["allDaemonStatuses"]
    healthy = {s["daemonType"] for s in statuses if s["healthy"]}
    return set(needed) <= healthy


def stop_sensors(stack: DagsterStack) -> list[str]:
    """Stop every running sensor (the UI's toggle): their ticks would spend the key mid-measurement."""
    data = stack.graphql(SENSORS_QUERY, {"repositorySelector": stack.repository_selector})["sensorsOrError"]
    stopped = []
    for sensor in data.get("results") or []:
        state = sensor.get("sensorState") or {}
        if state.get("status") == "RUNNING":
            stack.graphql(STOP_SENSOR_MUTATION, {"id": state["id"]})
            stopped.append(sensor["name"])
    return stopped


@contextlib.contextmanager
def dagster_stack(
    env: Mapping[str, str],
    *,
    code_root: Path = ROOT,
    log_dir: Path,
    quiet_sensors: bool = True,
    timeout: float = 300.0,
    daemon: bool = True,
    instance_yaml: Callable[[Path], str] | None = None,
) -> Iterator[DagsterStack]:
    """``dagster-webserver`` and ``dagster-daemon run`` on a fresh instance with the project's
    settings ``env``; ``quiet_sensors``: the running sensors (their ticks would spend the key) are
    stopped before the daemon's first tick. ``instance_yaml``: the instance's ``dagster.yaml`` for
    its home folder (default: the project's), e.g. :func:`tests.pods.pod_instance_yaml`."""
    home = Path(tempfile.mkdtemp(prefix="bench-dagster-home-"))
    if instance_yaml is None:
        shutil.copyfile(code_root / "dagster.yaml", home / "dagster.yaml")
    else:
        (home / "dagster.yaml").write_text(instance_yaml(home))
    full_env = code_env(code_root, DAGSTER_HOME=str(home), **dict(env))
    workspace = str(code_root / "workspace.yaml")
    port = free_port()
    started = time.monotonic()
    webserver = Service(
        "dagster-webserver",
        [sys.executable, "-m", "dagster_webserver", "-h", "127.0.0.1", "-p", str(port), "-w", workspace],
        full_env,
        code_root,
        log_dir / "webserver.log",
    )
    stack = DagsterStack(f"http://127.0.0.1:{port}", home, code_root, full_env, webserver)
    try:
        wait_until(
            "dagster-webserver",
            lambda: httpx.get(f"{stack.url}/server_info", timeout=5).status_code == 200,
            timeout,
            stack.services,
        )
        wait_until("code location", lambda: _location_loaded(stack), timeout, stack.services, every=0.5)
        stack.started_seconds["webserver"] = round(time.monotonic() - started, 1)
        if quiet_sensors:
            stop_sensors(stack)
        if daemon:
            start_daemon(stack, ("BACKFILL", "QUEUED_RUN_COORDINATOR"), timeout=timeout, since=started)
        yield stack
    finally:
        for service in reversed(stack.services):
            service.stop()
        shutil.rmtree(home, ignore_errors=True)


def start_daemon(
    stack: DagsterStack,
    needed: Sequence[str] = ("QUEUED_RUN_COORDINATOR",),
    *,
    timeout: float = 300.0,
    since: float | None = None,
) -> Service:
    """``dagster-daemon run`` for a stack started with ``daemon=False``, once the ``needed`` daemons
    report healthy; ``since``: the clock value ``started_seconds["daemon"]`` counts from."""
    if stack.daemon is not None:
        return stack.daemon
    since = time.monotonic() if since is None else since
    stack.daemon = Service(
        "dagster-daemon",
        # the console script of this interpreter's environment (Dagster's public entry point)
        [
            str(Path(sys.executable).with_name("dagster-daemon")),
            "run",
            "-w",
            str(stack.code_root / "workspace.yaml"),
        ],
        stack.env,
        stack.code_root,
        stack.webserver.log_path.parent / "daemon.log",
    )
    wait_until("dagster-daemon", lambda: _daemon_ready(stack, needed), timeout, stack.services, every=0.5)
    stack.started_seconds["daemon"] = round(time.monotonic() - since, 1)
    return stack.daemon


# ---------------------------------------------------------------------------------------------
# what the UI sends


ASSET_NODES_QUERY = """
query LaunchAssetNodes($assetKeys: [AssetKeyInput!], $group: AssetGroupSelector) {
  assetNodes(assetKeys: $assetKeys, group: $group) {
    assetKey { path }
    groupName
    jobNames
    isObservable
    isExecutable
    dependencyKeys { path }
    repository { name location { name } }
    partitionDefinition { description dimensionTypes { name dynamicPartitionsDefinitionName } }
    partitionKeysByDimension { name partitionKeys type }
  }
}
"""


BACKFILL_QUERY = """
query BackfillDetailsQuery($backfillId: String!) {
  partitionBackfillOrError(backfillId: $backfillId) {
    __typename
    ... on PartitionBackfill { status }
    ... on BackfillNotFoundError { message }
    ... on PythonError { message }
  }
}
"""

CANCEL_BACKFILL_MUTATION = """
mutation CancelBackfill($backfillId: String!) {
  cancelPartitionBackfill(backfillId: $backfillId) { __typename }
}
"""

RUNS_QUERY = """
query BackfillRuns($filter: RunsFilter!) {
  runsOrError(filter: $filter) {
    __typename
    ... on Runs { results { runId jobName status startTime endTime tags { key value } } }
  }
}
"""


def _key(node: Mapping[str, Any]) -> str:
    return "/".join(node["assetKey"]["path"])


def _same_partitions(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """``partitionDefinitionsEqual``: same description and dimension types."""
    if a is None or b is None:
        return a is b
    return a["description"] == b["description"] and a["dimensionTypes"] == b["dimensionTypes"]


def _common_job(nodes: Sequence[Mapping[str, Any]], preferred: str | None = None) -> str | None:
    """``getCommonJob``: the first job of the first asset that every asset is in."""
    if not nodes:
        return None
    common = [j for j in nodes[0]["jobNames"] if all(j in n["jobNames"] for n in nodes)]
    return next((j for j in common if j == preferred), common[0] if common else None)


def _anchor(nodes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """``getAnchorAssetForPartitionMappedBackfill``: a root, when every partitioned root shares a def."""
    keys = {_key(n) for n in nodes}
    roots = [n for n in nodes if not any("/".join(d["path"]) in keys for d in n["dependencyKeys"])]
    partitioned = sorted((r for r in roots if r["partitionDefinition"]), key=_key)
    if not partitioned:
        return None
    first = partitioned[0]
    if not all(_same_partitions(first["partitionDefinition"], r["partitionDefinition"]) for r in partitioned):
        return None
    return first


@dataclass
class UiLaunch:
    """One click on *Launch backfill*: the dialog's target and the mutation's ``backfillParams``."""

    target: str  # job | pureWithAnchorAsset | pureAll
    job: str | None
    assets: list[str]
    params: dict[str, Any]

    @property
    def partition_names(self) -> list[str]:
        return list(self.params.get("partitionNames") or [])


def asset_nodes(
    stack: DagsterStack, keys: Sequence[str] = (), group: str | None = None
) -> list[dict[str, Any]]:
    variables: dict[str, Any] = {}
    if group:
        variables["group"] = {**stack.repository_selector, "groupName": group}
    else:
        variables["assetKeys"] = [{"path": k.split("/")} for k in keys]
    nodes = stack.graphql(ASSET_NODES_QUERY, variables)["assetNodes"]
    if keys and not group:
        order = {k: i for i, k in enumerate(keys)}
        nodes.sort(key=lambda n: order.get(_key(n), len(order)))
    return nodes


def _selected_keys(
    node: Mapping[str, Any], dates: Sequence[dt.date], engines: Sequence[str] | None
) -> list[str]:
    """``explodePartitionKeysInSelectionMatching``: dimension 1 outer, dimension 2 inner, each in
    the dimension's own order; the date dimension is the range picked, the engine dimension the
    engines ticked (every key when ``engines`` is None)."""
    wanted_dates = {d.isoformat() for d in dates}
    per_dim: list[list[str]] = []
    for dim in node["partitionKeysByDimension"]:
        if dim["type"] == "TIME_WINDOW" or dim["name"] == "date":
            keys = [k for k in dim["partitionKeys"] if k in wanted_dates]
            missing = wanted_dates - set(keys)
            if missing:
                raise ValueError(f"dates {sorted(missing)} are not partitions of {_key(node)}")
        else:
            keys = [k for k in dim["partitionKeys"] if engines is None or k in engines]
        per_dim.append(keys)
    if len(per_dim) == 1:
        return per_dim[0]
    if len(per_dim) != 2:
        raise ValueError("the dialog supports one or two dimensions")
    return [f"{a}|{b}" for a in per_dim[0] for b in per_dim[1]]


def _params(
    stack: DagsterStack, target: str, job: str | None, nodes: Sequence[Mapping[str, Any]], keys: list[str]
) -> dict[str, Any]:
    """``onLaunchAsBackfill``'s three shapes (``runConfigData`` is left out: no saved config)."""
    base: dict[str, Any] = {
        "tags": [FROM_UI_TAG],
        "assetSelection": [{"path": list(n["assetKey"]["path"])} for n in nodes],
    }
    if target == "job" and job is not None and not job.startswith("__ASSET_JOB"):  # isHiddenAssetGroupJob
        return {
            **base,
            "partitionNames": keys,
            "fromFailure": False,
            "selector": {
                "partitionSetName": f"{job}_partition_set",
                "repositorySelector": stack.repository_selector,
            },
        }
    if target == "pureAll":
        return {**base, "allPartitions": True}
    return {**base, "partitionNames": keys, "fromFailure": False}


def ui_launch(
    stack: DagsterStack,
    nodes: Sequence[Mapping[str, Any]],
    dates: Sequence[dt.date],
    engines: Sequence[str] | None,
    preferred_job: str | None = None,
) -> UiLaunch:
    """What *Materialize...* on these assets, a date range and some engines, then *Launch backfill*
    sends (``stateForLaunchingAssets`` picks the target; the dialog builds the parameters)."""
    if any(n["isObservable"] or not n["isExecutable"] for n in nodes):
        raise ValueError("the UI refuses a selection with observable or external assets")
    partitioned = [n for n in nodes if n["partitionDefinition"]]
    if not partitioned:
        raise ValueError("no partitioned asset in the selection")
    first_def = partitioned[0]["partitionDefinition"]
    job = _common_job(nodes, preferred_job)
    same_space = all(_same_partitions(n["partitionDefinition"], first_def) for n in partitioned)
    same_repo = len({(n["repository"]["name"], n["repository"]["location"]["name"]) for n in nodes}) == 1
    names = [_key(n) for n in nodes]
    if same_repo and same_space and job:
        keys = _selected_keys(partitioned[0], dates, engines)
        if len(keys) == 1:
            raise ValueError("one partition: the dialog launches a single run, not a backfill")
        return UiLaunch("job", job, names, _params(stack, "job", job, nodes, keys))
    anchor = _anchor(nodes)
    if anchor is None:
        return UiLaunch("pureAll", None, names, _params(stack, "pureAll", None, nodes, []))
    keys = _selected_keys(anchor, dates, engines)
    return UiLaunch(
        "pureWithAnchorAsset", None, names, _params(stack, "pureWithAnchorAsset", None, nodes, keys)
    )


def ui_backfill_launches(
    stack: DagsterStack,
    *,
    assets: Sequence[str] = (),
    group: str | None = None,
    dates: Sequence[dt.date],
    engines: Sequence[str] | None = None,
) -> tuple[list[UiLaunch], str]:
    """The dialogs a user goes through to backfill ``dates`` x ``engines`` of these assets (or the
    group's *Materialize all*), and a note when one dialog cannot: where it offers *all partitions*
    only (``pureAll``), one dialog per partitions definition."""
    nodes = asset_nodes(stack, assets, group)
    nodes = [n for n in nodes if n["isExecutable"] and not n["isObservable"]]
    if group:  # the group's "Materialize all": every executable asset of the group
        nodes = [n for n in nodes if n["groupName"] == group]
    first = ui_launch(stack, nodes, dates, engines)
    if first.target != "pureAll":
        return [first], ""
    by_def: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        if n["partitionDefinition"]:
            d = n["partitionDefinition"]
            by_def.setdefault(f"{d['description']}|{d['dimensionTypes']}", []).append(n)
    launches = [ui_launch(stack, same, dates, engines) for same in by_def.values()]
    note = (
        f"the dialog for {len(nodes)} assets offers all partitions only (assets with different "
        f"partitions definitions); launched as {len(launches)} dialogs, one per partitions definition"
    )
    return launches, note


def launch_backfill(stack: DagsterStack, launch: UiLaunch) -> str:
    from dagster_graphql.client.query import LAUNCH_PARTITION_BACKFILL_MUTATION

    variables = {"backfillParams": launch.params}
    outcome = stack.answer(
        LAUNCH_PARTITION_BACKFILL_MUTATION, variables, "launchPartitionBackfill", "LaunchBackfillSuccess"
    )
    return str(outcome["backfillId"])


def backfill_runs(stack: DagsterStack, backfill_id: str) -> list[dict[str, Any]]:
    data = stack.graphql(RUNS_QUERY, {"filter": {"tags": [{"key": BACKFILL_TAG, "value": backfill_id}]}})
    return list(data["runsOrError"].get("results") or [])


RUN_FAILURES_QUERY = """
query RunFailures($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message level }
        ... on ExecutionStepFailureEvent {
          stepKey
          error { message errorChain { error { message } } }
        }
      }
    }
  }
}
"""


def run_failures(stack: DagsterStack, run_id: str, limit: int = 3) -> list[str]:
    """The step failures (or the run failure's message) of a run, short."""
    events = stack.graphql(RUN_FAILURES_QUERY, {"runId": run_id})["logsForRun"].get("events") or []
    out = []
    steps_failed = any(e["__typename"] == "ExecutionStepFailureEvent" for e in events)
    for event in events:
        if event["__typename"] == "ExecutionStepFailureEvent":
            error = event.get("error") or {}
            chain = [link["error"]["message"] for link in error.get("errorChain") or []]
            message = (chain[-1] if chain else error.get("message") or event.get("message") or "").strip()
            out.append(f"{event['stepKey']}: {message.splitlines()[0] if message else ''}")
        elif (
            not steps_failed
            and event["__typename"] in ("RunFailureEvent", "EngineEvent")
            and event.get("level") == "ERROR"
        ):
            out.append((event.get("message") or "").strip().splitlines()[0])
    return out[:limit]


def wait_backfills(
    stack: DagsterStack, backfill_ids: Sequence[str], timeout: float = 3600.0
) -> dict[str, Any]:
    """Poll ``partitionBackfillOrError`` for each until it has a terminal status and its runs ended
    (``observed_end``: when that was first seen); cancels the unfinished ones on timeout."""
    finals: dict[str, Any] = {}

    def ended() -> bool:
        for backfill_id in set(backfill_ids) - set(finals):
            variables = {"backfillId": backfill_id}
            data = stack.answer(BACKFILL_QUERY, variables, "partitionBackfillOrError", "PartitionBackfill")
            runs = backfill_runs(stack, backfill_id)
            if data["status"] in TERMINAL_BACKFILL and all(r["status"] in TERMINAL_RUN for r in runs):
                finals[backfill_id] = {**data, "observed_end": time.time()}
        return len(finals) == len(backfill_ids)

    try:
        wait_until("backfills", ended, timeout, stack.services, every=1.0, errors=())
    except TimeoutError:
        for backfill_id in set(backfill_ids) - set(finals):
            stack.graphql(CANCEL_BACKFILL_MUTATION, {"backfillId": backfill_id})
        raise
    return finals


@dataclass
class BackfillOutcome:
    """Launches of one selection (one per dialog), their backfills and runs."""

    backfill_ids: list[str]
    statuses: list[str]
    runs: list[dict[str, Any]]
    launched_at: float  # epoch seconds, before the first mutation
    ended_at: float  # epoch seconds, when the last backfill was seen terminal
    note: str = ""
    targets: list[str] = field(default_factory=list)
    jobs: list[str | None] = field(default_factory=list)
    partitions: int = 0
    launches: list[UiLaunch] = field(default_factory=list)

    @property
    def tables(self) -> list[str]:
        return sorted({a for launch in self.launches for a in launch.assets})

    @property
    def engines(self) -> list[str]:
        return sorted({k.split("|")[-1] for launch in self.launches for k in launch.partition_names})

    @property
    def wall_seconds(self) -> float:
        return round(self.ended_at - self.launched_at, 2)

    @property
    def run_statuses(self) -> dict[str, int]:
        return dict(Counter(run["status"] for run in self.runs))

    @property
    def runs_span(self) -> tuple[float, float] | None:
        starts = [r["startTime"] for r in self.runs if r.get("startTime")]
        ends = [r["endTime"] for r in self.runs if r.get("endTime")]
        return (min(starts), max(ends)) if starts and ends else None

    @property
    def status(self) -> str:
        return "+".join(sorted(set(self.statuses)))

    @property
    def succeeded(self) -> bool:
        return all(s in ("COMPLETED", "COMPLETED_SUCCESS") for s in self.statuses) and all(
            r["status"] == "SUCCESS" for r in self.runs
        )

    def failures(self) -> list[str]:
        return sorted({f for run in self.runs for f in run.get("failures", [])})

    def run_ranges(self, timed: bool = False) -> list[str]:
        """Each run's partition range, by start; ``timed``: with its start and end, in seconds since
        the launch."""
        out = []
        for run in sorted(self.runs, key=lambda r: r.get("startTime") or 0):
            tags = {t["key"]: t["value"] for t in run["tags"]}
            start = tags.get("dagster/asset_partition_range_start")
            end = tags.get("dagster/asset_partition_range_end")
            text = f"{start}..{end}" if start else tags.get("dagster/partition", "?")
            if timed and run.get("startTime") and run.get("endTime"):
                text += (
                    f" {run['startTime'] - self.launched_at:.0f}-{run['endTime'] - self.launched_at:.0f} s"
                )
            out.append(text)
        return out


@dataclass(frozen=True)
class UiSelection:
    """What a user picks: some assets (or a group's *Materialize all*), a date range, some engines
    (None: every key of the engine dimension)."""

    dates: tuple[dt.date, ...]
    assets: tuple[str, ...] = ()
    group: str | None = None
    engines: tuple[str, ...] | None = None


def run_ui_backfills(
    stack: DagsterStack, selections: Sequence[UiSelection], timeout: float = 3600.0
) -> list[BackfillOutcome]:
    """Every dialog of every selection launched at once (as fast as a user clicks), then waited for."""
    planned = [
        ui_backfill_launches(stack, assets=s.assets, group=s.group, dates=s.dates, engines=s.engines)
        for s in selections
    ]
    launched_at = time.time()
    ids = [[launch_backfill(stack, launch) for launch in launches] for launches, _ in planned]
    by_id = wait_backfills(stack, [i for group in ids for i in group], timeout)
    outcomes = []
    for (launches, note), backfill_ids in zip(planned, ids, strict=True):
        finals = [by_id[backfill_id] for backfill_id in backfill_ids]
        runs = [run for backfill_id in backfill_ids for run in backfill_runs(stack, backfill_id)]
        for run in runs:
            if run["status"] != "SUCCESS":
                run["failures"] = run_failures(stack, run["runId"])
        outcomes.append(
            BackfillOutcome(
                backfill_ids=backfill_ids,
                statuses=[f["status"] for f in finals],
                runs=runs,
                launched_at=launched_at,
                ended_at=max(f["observed_end"] for f in finals),
                note=note,
                targets=[launch.target for launch in launches],
                jobs=[launch.job for launch in launches],
                partitions=sum(len(launch.partition_names) for launch in launches),
                launches=launches,
            )
        )
    return outcomes


def wait_idle(stack: DagsterStack, timeout: float = 120.0) -> None:
    """Until no run is queued or in progress (e.g. a crashed run's retry)."""
    query = """query Busy {
      runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED, CANCELING]}) {
        ... on Runs { results { runId } }
      }
    }"""
    wait_until(
        "idle instance",
        lambda: not stack.graphql(query)["runsOrError"]["results"],
        timeout,
        stack.services,
        1.0,
    )


# schedules: the "Test schedule" dialog's dry run, then its "Launch all runs"

SCHEDULES_QUERY = """
query Schedules($repositorySelector: RepositorySelector!) {
  schedulesOrError(repositorySelector: $repositorySelector) {
    __typename
    ... on Schedules { results { name pipelineName } }
  }
}
"""

SCHEDULE_DRY_RUN_MUTATION = """
mutation ScheduleDryRunMutation($selectorData: ScheduleSelector!, $timestamp: Float) {
  scheduleDryRun(selectorData: $selectorData, timestamp: $timestamp) {
    __typename
    ... on DryRunInstigationTick {
      evaluationResult {
        runRequests {
          tags { key value }
          runConfigYaml
          jobName
          assetSelection { path }
          assetChecks { name assetKey { path } }
        }
        error { message }
      }
    }
    ... on PythonError { message }
  }
}
"""


def schedule_runs(
    stack: DagsterStack, at: dt.datetime, names: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """``executionParams`` of every run the schedules would request at ``at``
    (``buildExecutionParamsListSchedule``)."""
    schedules = stack.graphql(SCHEDULES_QUERY, {"repositorySelector": stack.repository_selector})
    out: list[dict[str, Any]] = []
    for schedule in schedules["schedulesOrError"]["results"]:
        if names and schedule["name"] not in names:
            continue
        selector = {**stack.repository_selector, "scheduleName": schedule["name"]}
        tick = stack.graphql(
            SCHEDULE_DRY_RUN_MUTATION, {"selectorData": selector, "timestamp": at.timestamp()}
        )
        result = tick["scheduleDryRun"]
        if result["__typename"] != "DryRunInstigationTick":
            raise GraphQLError(f"scheduleDryRun {schedule['name']}: {result}")
        evaluation = result["evaluationResult"] or {}
        if evaluation.get("error"):
            raise GraphQLError(f"schedule {schedule['name']}: {evaluation['error']['message']}")
        for request in evaluation.get("runRequests") or []:
            out.append(
                {
                    "runConfigData": request.get("runConfigYaml") or "{}",
                    "selector": {
                        "jobName": request.get("jobName") or schedule["pipelineName"],
                        **stack.repository_selector,
                        # the answer's selections and tags have the input types' shape
                        "assetSelection": request.get("assetSelection") or [],
                        "assetCheckSelection": request.get("assetChecks") or [],
                    },
                    "mode": "default",
                    "executionMetadata": {"tags": request["tags"]},
                }
            )
    return out


def launch_runs(stack: DagsterStack, params: list[dict[str, Any]]) -> list[str]:
    from dagster_graphql.client.query import LAUNCH_MULTIPLE_RUNS_MUTATION

    variables = {"executionParamsList": params}
    result = stack.answer(
        LAUNCH_MULTIPLE_RUNS_MUTATION, variables, "launchMultipleRuns", "LaunchMultipleRunsResult"
    )
    ids = []
    for launched in result["launchMultipleRunsResult"]:
        if launched["__typename"] != "LaunchRunSuccess":
            raise GraphQLError(f"launchMultipleRuns: {launched}")
        ids.append(launched["run"]["runId"])
    return ids


def wait_runs(stack: DagsterStack, run_ids: Sequence[str], timeout: float = 1800.0) -> list[dict[str, Any]]:
    def ended() -> list[dict[str, Any]] | None:
        runs = stack.graphql(RUNS_QUERY, {"filter": {"runIds": list(run_ids)}})["runsOrError"]["results"]
        done = len(runs) == len(run_ids) and all(r["status"] in TERMINAL_RUN for r in runs)
        return runs if done else None

    return wait_until(f"runs {list(run_ids)}", ended, timeout, stack.services, every=0.5, errors=())


# ---------------------------------------------------------------------------------------------
# the planner's minimum


BRANDS = "GET /v1/brands"
PROMPTS = "GET /v1/brands/{id}/prompts"
TRACKED = "GET /v1/brands/{id}/tracked-competitors"
TOPICS = "GET /v1/brands/{id}/topics"
GENERATIONS = "GET /v1/brands/{id}/generations"
LISTING_LIMIT = 999  # the client's limit for brands, prompts, topics, generations listings


def daily_tables(code_root: Path = ROOT) -> tuple[str, ...]:
    """The catalog's date x engine tables, in sync order (a new entry is measured with no list to keep)."""
    if str(code_root) not in sys.path:
        sys.path.insert(0, str(code_root))
    from sync import catalog

    return tuple(entry.spec.name for entry in catalog.DAILY)


@dataclass
class World:
    """What the planner needs of the sandbox's workspace, read once through the API."""

    brands: list[Any]  # sync.planning.BrandInput
    pages: dict[str, int]  # listing pages of one discovery / one snapshot refresh, by endpoint


def read_world(url: str, key: str, code_root: Path = ROOT) -> World:
    """Brands (engines, domain), prompts and tracked competitors' domains, as discovery reads them."""
    if str(code_root) not in sys.path:
        sys.path.insert(0, str(code_root))
    from resources.api.client import VisibilityClient
    from sync.discovery import Discovery, brand_inputs

    def pages(rows: Sequence[Any]) -> int:
        return max(1, math.ceil(len(rows) / LISTING_LIMIT))

    discovery = Discovery()
    with VisibilityClient(url, key) as client:
        scope = discovery.scope(client)
        inputs = brand_inputs(client, scope, discovery, prompts=True, competitors=True)
        discovery.topics(client, scope)
    listed = discovery.listed()[1]
    listing = {BRANDS: pages(scope.brands), GENERATIONS: len(scope.brands)}  # generations: one request
    for endpoint, name in ((PROMPTS, "prompts"), (TRACKED, "tracked_competitors"), (TOPICS, "topics")):
        listing[endpoint] = sum(pages(rows) for rows in listed[name].values())
    return World(inputs, listing)


def _extra_pages(db: Path, table: str, calls: Sequence[Any], page: int, owner: str, date_column: str) -> int:
    """Pages beyond the first of each paged call, from the rows a sync landed for that call."""
    import duckdb
    import pyarrow as pa

    if not calls:
        return 0
    frame = pa.table(
        {
            "call": list(range(len(calls))),
            "owner": [c.prompt_id if owner == "prompt_id" else c.brand_id for c in calls],
            "engine": [c.engine for c in calls],
            "start": [c.window.start for c in calls],
            "end": [c.window.end for c in calls],
        }
    )
    with duckdb.connect(str(db), read_only=True) as con:
        con.register("calls", frame)
        rows = con.execute(
            f"""SELECT c.call, COUNT(*) FROM calls c JOIN visibility.{table} r
                ON r.{owner} = c.owner AND r.{date_column} >= c.start AND r.{date_column} < c."end"
                AND (c.engine IS NULL OR r.engine = c.engine)
                GROUP BY c.call"""
        ).fetchall()
    return sum(max(0, math.ceil(n / page) - 1) for _, n in rows)


def planner_minimum(
    world: World,
    tables: Sequence[str],
    dates: Sequence[dt.date],
    engines: Sequence[str],
    landed: Path,
    *,
    snapshots: bool = False,
    code_root: Path = ROOT,
) -> dict[str, int]:
    """Fewest requests, by endpoint, that land ``tables`` over ``dates`` x ``engines``: the planner's
    calls for the whole selection, the further pages of paged calls (from the rows ``landed`` holds),
    one discovery, and with ``snapshots`` the snapshot listings (each listing once)."""
    if str(code_root) not in sys.path:
        sys.path.insert(0, str(code_root))
    import sync.planning as planning
    from resources.api.endpoints import (
        LIST_ANSWERS,
        LIST_PROMPT_MENTIONS,
        MAX_LIMIT_ANSWERS,
        MAX_LIMIT_PAGING,
    )
    from sync import catalog

    cells = {(d, e) for d in dates for e in engines}
    out: dict[str, int] = {}

    def add(endpoint: str, n: int) -> None:
        if n:
            out[endpoint] = out.get(endpoint, 0) + n

    order = list(engines)
    entries = [catalog.BY_NAME[table] for table in tables]
    for entry in entries:
        plan = entry.planner(cells, world.brands, order)
        for key, n in planning.expected_requests(plan).items():
            add(key, n)
        endpoint = entry.endpoints[0]
        if endpoint in (LIST_ANSWERS, LIST_PROMPT_MENTIONS):  # a paged row endpoint: its further pages too
            page = MAX_LIMIT_ANSWERS if endpoint == LIST_ANSWERS else MAX_LIMIT_PAGING
            owner = "prompt_id" if entry.needs_prompts else "brand_id"
            assert entry.spec.date_column is not None
            add(
                endpoint.key,
                _extra_pages(landed, entry.spec.name, plan.calls, page, owner, entry.spec.date_column),
            )
    listings = {BRANDS}
    if snapshots or any(entry.needs_prompts for entry in entries):
        listings.add(PROMPTS)
    if snapshots or any(entry.needs_competitors for entry in entries):
        listings.add(TRACKED)
    if snapshots:
        listings |= {TOPICS, GENERATIONS}
    for endpoint in sorted(listings):  # each listing once: the snapshots' rows serve the discovery
        add(endpoint, world.pages[endpoint])
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------
# comparing two warehouses


WRITER_COLUMNS = ("_loaded_at", "_run_id")
#: Columns a run sets anew whatever it fetched (a re-run's differ from a clean run's).
RUN_COLUMNS = (*WRITER_COLUMNS, "first_seen_at", "last_seen_at")


def compare_tables(
    a: Path, b: Path, tables: Iterable[str] | None = None, drop: Sequence[str] = WRITER_COLUMNS
) -> dict[str, dict[str, Any]]:
    """Per table (default: every table of either file): rows in ``a`` and ``b`` and rows of each missing
    from the other (as multisets, every column but ``drop``); ``columns`` when they differ."""
    import duckdb

    out: dict[str, dict[str, Any]] = {}
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{a}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{b}' AS b (READ_ONLY)")
        if tables is None:
            tables = [
                t
                for (t,) in con.execute(
                    "SELECT DISTINCT table_name FROM duckdb_tables() WHERE database_name IN ('a', 'b') "
                    "AND schema_name = 'visibility' AND NOT starts_with(table_name, '_') ORDER BY ALL"
                ).fetchall()
            ]

        def columns(db: str, table: str) -> list[str]:
            found = con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = "
                "'visibility' AND table_name = ?",
                [db, table],
            ).fetchall()
            return sorted(c for (c,) in found if c not in drop)

        for table in tables:
            ca, cb = columns("a", table), columns("b", table)
            entry: dict[str, Any] = {"rows_a": 0, "rows_b": 0, "only_a": 0, "only_b": 0}
            if ca:
                entry["rows_a"] = con.execute(f"SELECT COUNT(*) FROM a.visibility.{table}").fetchone()[0]
            if cb:
                entry["rows_b"] = con.execute(f"SELECT COUNT(*) FROM b.visibility.{table}").fetchone()[0]
            if ca != cb:
                entry["columns"] = {"only_a": sorted(set(ca) - set(cb)), "only_b": sorted(set(cb) - set(ca))}
            shared = ", ".join(f'"{c}"' for c in ca if c in set(cb))
            if shared:
                for this, other, name in (("a", "b", "only_a"), ("b", "a", "only_b")):
                    entry[name] = con.execute(
                        f"SELECT COUNT(*) FROM (SELECT {shared} FROM {this}.visibility.{table} "
                        f"EXCEPT ALL SELECT {shared} FROM {other}.visibility.{table})"
                    ).fetchone()[0]
            else:
                entry["only_a"], entry["only_b"] = entry["rows_a"], entry["rows_b"]
            out[table] = entry
    return out


def same_rows(comparison: Mapping[str, Mapping[str, Any]]) -> bool:
    return all(not c["only_a"] and not c["only_b"] and "columns" not in c for c in comparison.values())


def days(last: dt.date, n: int) -> list[dt.date]:
    """``n`` days ending with ``last``."""
    return [last - dt.timedelta(days=n - 1 - i) for i in range(n)]
