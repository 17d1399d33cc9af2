"""Runs as pods on one machine, for tests and benchmarks: each run's ``dagster api execute_run`` in a
mount namespace of its own (``unshare --mount``) with private tmpfs over the instance's local artifact
storage and over TMPDIR, as each Kubernetes pod has its own disk; the instance's run, event and
schedule storage is shared (SQLite in a shared folder), as Postgres is in production.

:class:`PodRunLauncher` is the instance's run launcher (``run_launcher`` of :func:`pod_instance_yaml`);
the daemon's run queue calls it. Each pod, before its namespace goes away, lists what its private
folders still hold into ``<pods_dir>/<run_id>.left`` (one path a line, ``storage/...`` or
``tmp/...``), and its process group id is in ``<pods_dir>/<run_id>.pid`` (a test kills a pod with
``os.killpg``). Run monitoring asks :meth:`PodRunLauncher.check_run_worker_health`, so a killed pod's
run is failed as Kubernetes' launcher fails it.

Test machinery: Dagster exports neither the arguments of ``dagster api execute_run`` nor a launcher's
health result, so this module imports those private modules (``tests/test_public_dagster_api.py``
lists why); the benchmarks borrow it from here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from dagster import DefaultRunLauncher

ROOT = Path(__file__).resolve().parents[1]

#: The last line of a pod's report: its folders were listed (an empty report proves nothing).
LISTED = "# listed"
#: The pod: private tmpfs over the storage folder and TMPDIR, the run, then what is left in them.
POD_SCRIPT = r"""
storage=$1; tmp=$2; report=$3; LISTED=$4; shift 4
mount -t tmpfs -o size=2g,mode=0777 pod-storage "$storage" || exit 97
mount -t tmpfs -o size=2g,mode=1777 pod-tmp "$tmp" || exit 97
TMPDIR="$tmp" "$@"
rc=$?
{ (cd "$storage" && find . -mindepth 1 | sed 's|^\.|storage|') &&
  (cd "$tmp" && find . -mindepth 1 | sed 's|^\.|tmp|') && echo "$LISTED"; } > "$report.part"
mv "$report.part" "$report"
exit $rc
"""


def unshare_refused() -> str | None:
    """Why pods cannot be made here (None: they can): ``unshare --mount`` needs root or user namespaces."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "mount -t tmpfs probe /mnt"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare --mount with a tmpfs mount refused: {probe.stderr.strip()[:200]}"
    return None


class PodRunLauncher(DefaultRunLauncher):
    """Starts each run in a pod of its own (see the module doc); of Dagster's default launcher it
    keeps only the configurable class's plumbing."""

    def __init__(self, pods_dir: str, inst_data: Any = None) -> None:
        super().__init__(inst_data=inst_data)
        self.pods_dir = Path(pods_dir)
        self.tmp_mount = self.pods_dir / "tmp"
        self.tmp_mount.mkdir(parents=True, exist_ok=True)
        self._pods: dict[str, subprocess.Popen[bytes]] = {}

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"pods_dir": str}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: dict[str, Any]) -> PodRunLauncher:
        return cls(inst_data=inst_data, **config_value)

    def launch_run(self, context: Any) -> None:
        from dagster._cli.api import ExecuteRunArgs

        run = context.dagster_run
        args = ExecuteRunArgs(
            job_origin=run.job_code_origin,
            run_id=run.run_id,
            instance_ref=self._instance.get_ref(),
            set_exit_code_on_failure=True,
        ).get_command_args()
        if args[0] == "dagster":  # the console script, which a pod's PATH may not have
            args = [sys.executable, "-m", "dagster", *args[1:]]
        storage = Path(self._instance.storage_directory())
        storage.mkdir(parents=True, exist_ok=True)
        report = self.pods_dir / f"{run.run_id}.left"
        log = open(self.pods_dir / f"{run.run_id}.log", "ab")  # noqa: SIM115 - the pod's, closed by the OS
        mounts = [str(storage), str(self.tmp_mount), str(report), LISTED]
        pod = subprocess.Popen(
            ["unshare", "--mount", "sh", "-c", POD_SCRIPT, "pod", *mounts, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the pod, killed whole by a test
        )
        log.close()
        (self.pods_dir / f"{run.run_id}.pid").write_text(str(pod.pid))
        self._pods[run.run_id] = pod

    def terminate(self, run_id: str) -> bool:
        pod = self._pods.get(run_id)
        if pod is None or pod.poll() is not None:
            return False
        self._instance.report_run_canceling(self._instance.get_run_by_id(run_id))
        os.killpg(pod.pid, signal.SIGTERM)
        return True

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: Any) -> Any:
        from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus

        pod = self._pods.get(run.run_id)
        if pod is None:
            return CheckRunHealthResult(WorkerStatus.UNKNOWN, "not launched by this process")
        code = pod.poll()
        if code is None:
            return CheckRunHealthResult(WorkerStatus.RUNNING)
        if code == 0:
            return CheckRunHealthResult(WorkerStatus.SUCCESS)
        return CheckRunHealthResult(WorkerStatus.FAILED, f"the pod ended with {code}")


def pod_instance_yaml(home: Path, code_root: Path = ROOT, monitoring_seconds: int = 2) -> str:
    """The production instance (``deploy/dagster.yaml``) with SQLite in a shared folder for Postgres,
    the pods' launcher, run monitoring every ``monitoring_seconds`` (a killed pod's run fails soon),
    and no automatic retry of crashed runs."""
    config = yaml.safe_load((code_root / "deploy" / "dagster.yaml").read_text())
    config.pop("storage", None)
    config["storage"] = {"sqlite": {"base_dir": str(home / "shared")}}
    config["local_artifact_storage"] = {
        "module": "dagster.core.storage.root",
        "class": "LocalArtifactStorage",
        "config": {"base_dir": str(home / "local")},
    }
    config["compute_logs"] = {
        "module": "dagster.core.storage.local_compute_log_manager",
        "class": "LocalComputeLogManager",
        "config": {"base_dir": str(home / "compute_logs")},
    }
    config["run_launcher"] = {
        "module": "tests.pods",
        "class": "PodRunLauncher",
        "config": {"pods_dir": str(home / "pods")},
    }
    monitoring = {**config.get("run_monitoring", {}), "poll_interval_seconds": monitoring_seconds}
    config["run_monitoring"] = monitoring
    # Dagster's retry of a crashed run is left out: on SQLite event storage its daemon launched the
    # retry of a killed run in one test run of two; the backfill does not need it (the run that takes
    # a dead claimant's table over lands the whole backfill's cells)
    config["run_retries"] = {"enabled": False}
    return yaml.safe_dump(config, sort_keys=False)


def pods_left(pods_dir: Path) -> dict[str, list[str]]:
    """Per run, what its pod's private folders held when it ended (runs whose pod reported); a
    report whose listing failed says so."""
    out = {}
    for report in sorted(pods_dir.glob("*.left")):
        lines = [line for line in report.read_text().splitlines() if line]
        out[report.stem] = lines[:-1] if lines[-1:] == [LISTED] else [*lines, "(the listing failed)"]
    return out
