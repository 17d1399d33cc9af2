"""The Dagster UI on the project's workspace, driven through the webserver a user opens.

One ``dagster-webserver`` for the module, started as ``dagster dev`` starts it (``bench/daemon.py``:
the project's ``workspace.yaml``, a fresh ``DAGSTER_HOME`` holding the project's ``dagster.yaml``),
against the session's sandbox. Through its GraphQL API (what the UI's pages query):

* every asset (and its checks), job, schedule and sensor of ``pipelines.definitions.defs`` is listed
  and loads on its own page without a ``PythonError``;
* a partition picked in the *Materialize* dialog launches one run (``launchPipelineExecution`` with a
  ``dagster/partition`` tag, as the UI sends it), which succeeds and lands every table of the sync;
* the ``visibility_report`` asset, launched the same way after it, shows its image in its metadata;
* a ``sync_now`` launch with a wrong window is refused, its field on the error's first line, no run.

The daemon starts only for the launches (the run queue hands the runs to the launcher). A browser
test takes screenshots of the asset graph and of the report's asset page with headless Chromium
(skipped without Chromium); they go to ``tmp_path``, or to ``docs/img/`` (shown in the README) with
``VISIBILITY_UPDATE_SCREENSHOTS=1``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import daemon as D
from pipelines.definitions import defs
from pipelines.jobs import SYNC_JOB
from sandbox.testing import SandboxHandle
from tests.fixtures_sandbox import SANDBOX_TODAY
from tests.pipelines.dagster_ui import PARTITION_TAG, latest_materialization, launch_run, ui_run_params

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "img"
#: The newest day the sandbox has data for, on one engine: one partition of the sync.
PARTITION = f"{SANDBOX_TODAY - dt.timedelta(days=1)}|chatgpt"
REPORT_ASSET = "visibility_report"
REPORT_JOB = "visibility_report"
RUN_TIMEOUT_SECONDS = 240.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

REPOSITORY_QUERY = """
query Repository($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    __typename
    ... on Repository {
      assetNodes { assetKey { path } }
      jobs { name }
      schedules { name }
      sensors { name }
    }
    ... on PythonError { message stack }
  }
}
"""

ASSET_QUERY = """
query AssetPage($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    __typename
    ... on AssetNode {
      assetKey { path }
      groupName
      jobNames
      description
      partitionDefinition { description }
      assetChecksOrError {
        __typename
        ... on AssetChecks { checks { name } }
        ... on AssetCheckNeedsMigrationError { message }
      }
    }
    ... on AssetNotFoundError { message }
  }
}
"""

JOB_QUERY = """
query JobPage($selector: PipelineSelector!) {
  pipelineOrError(params: $selector) {
    __typename
    ... on Pipeline { name solidHandles { handleID } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on PythonError { message stack }
  }
}
"""

SCHEDULE_QUERY = """
query SchedulePage($selector: ScheduleSelector!) {
  scheduleOrError(scheduleSelector: $selector) {
    __typename
    ... on Schedule { name cronSchedule futureTicks(limit: 2) { results { timestamp } } }
    ... on ScheduleNotFoundError { message }
    ... on PythonError { message stack }
  }
}
"""

SENSOR_QUERY = """
query SensorPage($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { name minIntervalSeconds targets { pipelineName } sensorState { status } }
    ... on SensorNotFoundError { message }
    ... on UnauthorizedError { message }
    ... on PythonError { message stack }
  }
}
"""


@pytest.fixture(scope="module")
def stack(sandbox: SandboxHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[D.DagsterStack]:
    """The webserver on the project's workspace, its sensors stopped (their ticks would add runs)."""
    work = tmp_path_factory.mktemp("ui")
    env = {
        "VISIBILITY_API_URL": sandbox.url,
        "VISIBILITY_API_KEY": sandbox.keys["workspace"],
        "VISIBILITY_WAREHOUSE": f"duckdb:///{work / 'ui.duckdb'}",
        "VISIBILITY_START_DATE": D.START_DATE.isoformat(),
    }
    with D.dagster_stack(env, log_dir=work / "logs", daemon=False, timeout=240) as started:
        yield started


def names(stack: D.DagsterStack) -> dict[str, set[str]]:
    data = stack.graphql(REPOSITORY_QUERY, {"selector": stack.repository_selector})["repositoryOrError"]
    assert data["__typename"] == "Repository", data
    return {
        "assets": {"/".join(n["assetKey"]["path"]) for n in data["assetNodes"]},
        "jobs": {j["name"] for j in data["jobs"] if not j["name"].startswith("__ASSET_JOB")},
        "schedules": {s["name"] for s in data["schedules"]},
        "sensors": {s["name"] for s in data["sensors"]},
    }


def test_every_asset_check_job_schedule_and_sensor_of_the_definitions_loads_in_the_ui(
    stack: D.DagsterStack,
) -> None:
    repository = defs.get_repository_def()
    expected = {
        "assets": {k.to_user_string() for k in repository.asset_graph.get_all_asset_keys()},
        "jobs": {j.name for j in repository.get_all_jobs() if not j.name.startswith("__ASSET_JOB")},
        "schedules": {s.name for s in repository.schedule_defs},
        "sensors": {s.name for s in repository.sensor_defs},
    }
    expected_checks = {
        (k.asset_key.to_user_string(), k.name) for k in repository.asset_graph.asset_check_keys
    }

    assert names(stack) == expected

    problems: list[str] = []
    checks: set[tuple[str, str]] = set()
    selector = stack.repository_selector
    for asset in sorted(expected["assets"]):
        node = stack.graphql(ASSET_QUERY, {"assetKey": {"path": asset.split("/")}})["assetNodeOrError"]
        if node["__typename"] != "AssetNode" or node["assetChecksOrError"]["__typename"] != "AssetChecks":
            problems.append(f"asset {asset}: {node}")
            continue
        checks |= {(asset, c["name"]) for c in node["assetChecksOrError"]["checks"]}
    pages = [
        (JOB_QUERY, "pipelineOrError", "Pipeline", {**selector, "pipelineName": job})
        for job in expected["jobs"]
    ]
    pages += [
        (SCHEDULE_QUERY, "scheduleOrError", "Schedule", {**selector, "scheduleName": name})
        for name in expected["schedules"]
    ]
    pages += [
        (SENSOR_QUERY, "sensorOrError", "Sensor", {**selector, "sensorName": name})
        for name in expected["sensors"]
    ]
    for query, field, typename, variables in pages:
        page = stack.graphql(query, {"selector": variables})[field]
        if page["__typename"] != typename:
            problems.append(f"{field} {variables}: {page}")
    assert not problems, "\n".join(problems)
    assert checks == expected_checks


@dataclass
class Launched:
    """The runs launched from the UI: the sync of one partition, then the report."""

    sync_run: dict[str, Any]
    sync_assets: list[str]
    report_run: dict[str, Any]


@pytest.fixture(scope="module")
def launched(stack: D.DagsterStack) -> Launched:
    """*Materialize* on every asset of the sync for one partition, then on the report (one run each,
    one after the other: the report reads what the sync landed)."""
    D.start_daemon(stack, ("QUEUED_RUN_COORDINATOR",))
    nodes = [n for n in D.asset_nodes(stack, sorted(names(stack)["assets"])) if SYNC_JOB in n["jobNames"]]
    job = D._common_job(nodes, SYNC_JOB)
    assert job == SYNC_JOB  # the dialog's job for this selection
    assets = sorted(D._key(n) for n in nodes)
    sync_id = launch_run(stack, ui_run_params(stack, job, assets, PARTITION))
    [sync_run] = D.wait_runs(stack, [sync_id], RUN_TIMEOUT_SECONDS)
    report_id = launch_run(stack, ui_run_params(stack, REPORT_JOB, [REPORT_ASSET]))
    [report_run] = D.wait_runs(stack, [report_id], RUN_TIMEOUT_SECONDS)
    return Launched(sync_run, assets, report_run)


def test_a_partition_materialized_from_the_ui_runs_and_lands_every_table_of_the_sync(
    stack: D.DagsterStack, launched: Launched
) -> None:
    run = launched.sync_run
    assert run["status"] == "SUCCESS", D.run_failures(stack, run["runId"])
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert tags[PARTITION_TAG] == PARTITION and tags[D.FROM_UI_TAG["key"]] == "true"

    partitioned = {
        D._key(n) for n in D.asset_nodes(stack, launched.sync_assets) if n["partitionDefinition"] is not None
    }
    assert partitioned and partitioned < set(launched.sync_assets)  # the snapshot tables have none
    for asset in launched.sync_assets:
        event = latest_materialization(stack, asset, PARTITION if asset in partitioned else None)
        assert event is not None and event["runId"] == run["runId"], asset
        assert event["metadata"]["rows_landed"] > 0, (asset, event["metadata"])


def test_the_report_launched_after_the_sync_shows_its_image_in_the_materialization(
    stack: D.DagsterStack, launched: Launched
) -> None:
    run = launched.report_run
    assert run["status"] == "SUCCESS", D.run_failures(stack, run["runId"])

    event = latest_materialization(stack, REPORT_ASSET)
    assert event is not None and event["runId"] == run["runId"]
    metadata = event["metadata"]
    prefix = "![visibility report](data:image/png;base64,"
    assert metadata["report"].startswith(prefix)
    assert base64.b64decode(metadata["report"][len(prefix) : -1]).startswith(PNG_SIGNATURE)
    assert Path(metadata["path"]).read_bytes().startswith(PNG_SIGNATURE)
    assert metadata["brands"] >= 1 and metadata["last_day"] == PARTITION.split("|")[0]


# ---------------------------------------------------------------------------------------------
# screenshots


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    return found or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


#: Headless, as root too, and quiet on a machine without internet (no background connections).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def screenshot(url: str, path: Path, *, height: int = 1000, timeout: float = 120.0) -> str:
    """``url`` rendered by headless Chromium once its scripts have run: the PNG at ``path``, and the
    page's DOM (returned) to check what it shows. Chromium and its helpers end with the call."""
    program = chromium()
    assert program is not None
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        args = [
            program,
            "--headless=new",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size=1600,{height}",
            "--virtual-time-budget=20000",  # the page's requests and renders, in virtual time
            f"--screenshot={path}",
            "--dump-dom",
            url,
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
        try:
            dom, _ = process.communicate(timeout=timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # its renderer and GPU helpers too
            process.wait()
    assert process.returncode == 0 and path.exists(), f"chromium exited {process.returncode}"
    return dom


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed")
def test_screenshots_show_the_asset_graph_and_the_reports_asset_page(
    stack: D.DagsterStack, launched: Launched, tmp_path: Path
) -> None:
    folder = tmp_path
    stack.graphql("mutation { setNuxSeen }")  # the first visit's newsletter dialog, as "Skip" closes it
    group = next(n["groupName"] for n in D.asset_nodes(stack, ["competitor_trends"]))
    tables = [D._key(n) for n in D.asset_nodes(stack, group=group)]

    graph = screenshot(
        f"{stack.url}/locations/{stack.location}/asset-groups/{group}",
        folder / "ui-asset-graph.png",
        height=1500,
    )
    report = screenshot(f"{stack.url}/assets/{REPORT_ASSET}?view=events", folder / "ui-report-asset.png")

    for dom in (graph, report):  # rendered: no loading spinner (its class names the component) nor error
        assert "Spinner" not in dom and "PythonError" not in dom
    assert all(table in graph for table in tables) and "visibility_report" in graph
    assert "Materialized in run" in report and launched.report_run["runId"][:8] in report
    assert all(label in report for label in ("first_day", "png_bytes", "brands"))
    images = [folder / "ui-asset-graph.png", folder / "ui-report-asset.png"]
    for image in images:
        assert image.read_bytes().startswith(PNG_SIGNATURE) and image.stat().st_size > 50_000
    if os.environ.get("VISIBILITY_UPDATE_SCREENSHOTS") == "1":  # only pictures of a passing run
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for image in images:
            shutil.copyfile(image, SCREENSHOTS / image.name)


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed")
def test_the_report_image_opens_with_one_click_from_the_assets_page(
    stack: D.DagsterStack, launched: Launched, tmp_path: Path
) -> None:
    """The asset's page opens on *Overview*; its *Metadata* table's ``report`` row holds *[Show
    Markdown]*, whose one click shows the image (docs/OPERATIONS.md, "The report")."""
    from playwright.sync_api import sync_playwright

    stack.graphql("mutation { setNuxSeen }")
    shot = tmp_path / "ui-report-dialog.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{stack.url}/assets/{REPORT_ASSET}", wait_until="networkidle", timeout=120_000)
            row = page.locator("tr", has=page.get_by_text("report", exact=True))
            row.get_by_text("[Show Markdown]").click(timeout=60_000)  # the one click
            image = page.get_by_role("dialog").locator("img[alt='visibility report']")
            image.wait_for(state="visible", timeout=60_000)
            width, height = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert width >= 1000 and height >= 300  # the drawn report, not a broken-image icon
    assert shot.read_bytes().startswith(PNG_SIGNATURE) and shot.stat().st_size > 50_000
    if os.environ.get("VISIBILITY_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(shot, SCREENSHOTS / shot.name)


# ---------------------------------------------------------------------------------------------
# command-line runs re-executed from the UI

#: The window of the command-line runs: the sandbox's newest two days, one engine (a short sync).
CLI_WINDOW = ["--start", f"{SANDBOX_TODAY - dt.timedelta(days=2)}", "--end", f"{SANDBOX_TODAY}"]
CLI_RUN = [sys.executable, "-m", "pipelines.cli", "run", *CLI_WINDOW, "--engine", "chatgpt", "--quiet"]
LAUNCHED_BY_CLI = {"key": "visibility/launched_by", "value": "visibility-sync"}


def warehouse(stack: D.DagsterStack) -> Path:
    return Path(stack.env["VISIBILITY_WAREHOUSE"].removeprefix("duckdb:///"))


def cli_run(stack: D.DagsterStack, **env: str) -> dict[str, Any]:
    """``visibility-sync run`` recorded in the stack's instance; its run as the UI lists it. The
    daemon runs, to start the re-executions the UI queues."""
    D.start_daemon(stack, ("QUEUED_RUN_COORDINATOR",))
    before = {r["runId"] for r in cli_runs(stack)}
    env = {**stack.env, **env}
    done = subprocess.run(CLI_RUN, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    [run] = [r for r in cli_runs(stack) if r["runId"] not in before]
    run["output"] = done.stdout + done.stderr
    return run


def cli_runs(stack: D.DagsterStack) -> list[dict[str, Any]]:
    return stack.graphql(D.RUNS_QUERY, {"filter": {"tags": [LAUNCHED_BY_CLI]}})["runsOrError"]["results"]


def children(stack: D.DagsterStack, parent: str) -> list[str]:
    tag = {"key": "dagster/parent_run_id", "value": parent}
    found = stack.graphql(D.RUNS_QUERY, {"filter": {"tags": [tag]}})["runsOrError"]["results"]
    return [r["runId"] for r in found]


#: The run page's split button: its face re-executes all steps, its arrow opens the other choices.
REEXECUTE_ALL = "Re-execute all (*)"


def reexecute_on_run_page(
    stack: D.DagsterStack, run_id: str, choice: str | None = None, shot: Path | None = None
) -> None:
    """Open the page of run ``run_id`` in Chromium and click *Re-execute all (*)*, or ``choice`` in
    the menu of its arrow; returns once the UI has moved to the page of the run it launched."""
    from playwright.sync_api import sync_playwright

    stack.graphql("mutation { setNuxSeen }")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(f"{stack.url}/runs/{run_id}", wait_until="networkidle", timeout=120_000)
            face = page.get_by_role("button", name=REEXECUTE_ALL)
            face.wait_for(state="visible", timeout=60_000)
            if choice is None:
                face.click()
            else:
                buttons = page.get_by_role("button")
                arrow = buttons.all_inner_texts().index(REEXECUTE_ALL) + 1  # the unnamed one beside it
                buttons.nth(arrow).click()
                page.get_by_text(choice, exact=True).click(timeout=60_000)
            page.wait_for_url(lambda url: "/runs/" in url and run_id not in url, timeout=60_000)
            if shot is not None:
                page.screenshot(path=str(shot))
        finally:
            browser.close()


def run_ids_in(db: Path, table: str) -> set[str]:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return {r for (r,) in con.execute(f"SELECT DISTINCT _run_id FROM visibility.{table}").fetchall()}


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed")
def test_a_command_line_run_re_executed_from_its_run_page_succeeds_and_lands_the_same_rows(
    stack: D.DagsterStack, tmp_path: Path
) -> None:
    """*Re-execute all* on the page of a ``visibility-sync run`` run (recorded in DAGSTER_HOME): the
    code location runs the same job with the run's tags and config, and lands the same rows."""
    from tests.processes.warehouse_rows import rows_of

    parent = cli_run(stack)
    assert parent["status"] == "SUCCESS", parent["output"]
    landed = rows_of(warehouse(stack))

    reexecute_on_run_page(stack, parent["runId"], shot=tmp_path / "ui-cli-reexecuted.png")

    [child_id] = children(stack, parent["runId"])
    [child] = D.wait_runs(stack, [child_id], RUN_TIMEOUT_SECONDS)
    assert child["status"] == "SUCCESS", D.run_failures(stack, child_id)
    tags = {t["key"]: t["value"] for t in child["tags"]}
    assert tags["dagster/asset_partition_range_start"] == f"{SANDBOX_TODAY - dt.timedelta(days=2)}|chatgpt"
    assert rows_of(warehouse(stack)) == landed
    assert run_ids_in(warehouse(stack), "prompt_mentions") == {child_id}  # landed again, by the child


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed")
def test_a_failed_command_line_run_re_executed_from_failure_on_its_run_page_lands_the_same_rows(
    stack: D.DagsterStack, sandbox: SandboxHandle
) -> None:
    """A ``visibility-sync run`` whose key was refused fails its first step; *From failure* in the
    re-execute menu of its page runs it in the code location (whose key is the right one) and lands the
    window."""
    from tests.processes.warehouse_rows import rows_of

    reference = cli_run(stack)
    assert reference["status"] == "SUCCESS", reference["output"]
    landed = rows_of(warehouse(stack))
    parent = cli_run(stack, VISIBILITY_API_KEY=sandbox.keys["revoked"])
    assert parent["status"] == "FAILURE", parent["output"]

    reexecute_on_run_page(stack, parent["runId"], "From failure")

    [child_id] = children(stack, parent["runId"])
    [child] = D.wait_runs(stack, [child_id], RUN_TIMEOUT_SECONDS)
    assert child["status"] == "SUCCESS", D.run_failures(stack, child_id)
    assert {t["key"]: t["value"] for t in child["tags"]}.get("dagster/is_resume_retry") == "true"
    assert rows_of(warehouse(stack)) == landed
    assert run_ids_in(warehouse(stack), "prompt_mentions") == {child_id}


START_SENSOR_MUTATION = """
mutation StartSensor($sensorSelector: SensorSelector!) {
  startSensor(sensorSelector: $sensorSelector) { __typename ... on PythonError { message } }
}
"""


def test_a_killed_command_line_run_is_failed_by_the_code_locations_sensor_in_the_daemon(
    stack: D.DagsterStack,
) -> None:
    """SIGKILL leaves a recorded run live; the daemon's tick of ``visibility_orphaned_runs`` (no
    command needed) fails it, as the UI then shows."""
    D.start_daemon(stack, ("QUEUED_RUN_COORDINATOR",))
    before = {r["runId"] for r in cli_runs(stack)}
    process = subprocess.Popen(
        CLI_RUN,
        cwd=ROOT,
        env=stack.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        [run] = D.wait_until(
            "the command's run",
            lambda: [r for r in cli_runs(stack) if r["runId"] not in before] or None,
            RUN_TIMEOUT_SECONDS,
            stack.services,
            every=0.1,
        )
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert run["status"] not in D.TERMINAL_RUN

    selector = {**stack.repository_selector, "sensorName": "visibility_orphaned_runs"}
    started = stack.graphql(START_SENSOR_MUTATION, {"sensorSelector": selector})["startSensor"]
    try:
        assert started["__typename"] == "Sensor", started
        [ended] = D.wait_runs(stack, [run["runId"]], RUN_TIMEOUT_SECONDS)
    finally:
        D.stop_sensors(stack)
    assert ended["status"] == "FAILURE"


def test_a_bad_sync_now_window_is_refused_by_the_launch_naming_its_field_and_creates_no_run(
    stack: D.DagsterStack,
) -> None:
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION

    from pipelines.sync_now import SYNC_NOW_JOB

    params = {
        "selector": {**stack.repository_selector, "pipelineName": SYNC_NOW_JOB},
        "mode": "default",
        "runConfigData": {"days": 0},  # what the launchpad sends for `days: 0`
        "executionMetadata": {"tags": []},
    }
    answer = httpx.post(  # the webserver answers a PythonError with 500, as the UI receives it
        f"{stack.url}/graphql",
        json={"query": LAUNCH_PIPELINE_EXECUTION_MUTATION, "variables": {"executionParams": params}},
        timeout=120,
    )
    refused = answer.json()["data"]["launchPipelineExecution"]

    assert refused["__typename"] == "PythonError", refused  # the dialog the UI shows
    first_line = refused["message"].splitlines()[0]
    assert (
        first_line
        == "dagster._core.errors.DagsterInvalidConfigError: sync_now days must be from 1 to 366, got 0"
    )
    runs = stack.graphql(D.RUNS_QUERY, {"filter": {"pipelineName": SYNC_NOW_JOB}})["runsOrError"]
    assert runs["results"] == []
