"""deploy/Dockerfile: it copies what exists and what the project installs, installs it as the README
does, runs as a non-root user, and its command serves the definitions the way the Helm chart probes
them. The image is built only where a Docker daemon answers."""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.testing import SandboxHandle

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "Dockerfile.dockerignore"  # BuildKit's ignore file for this Dockerfile
BIN = Path(sys.executable).parent


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _all(instruction: str) -> list[str]:
    return [arguments for name, arguments in _instructions() if name == instruction]


def _copied_sources() -> list[str]:
    sources: list[str] = []
    for arguments in _all("COPY"):
        parts = [part for part in arguments.split() if not part.startswith("--")]
        sources.extend(parts[:-1])
    return sources


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _ignored(relative: str) -> bool:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = relative.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(prefix, pattern) or fnmatch.fnmatch(prefix, pattern.removeprefix("**/"))
        for pattern in patterns
        for prefix in prefixes
    )


def test_the_image_copies_only_files_that_exist_none_of_them_ignored() -> None:
    sources = _copied_sources()
    assert sources
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such file in the repository"
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        kept = [f for f in files if not _ignored(f.relative_to(ROOT).as_posix())]
        assert kept, f"COPY {source}: every file of it is excluded by {DOCKERIGNORE.name}"
        python = [f for f in files if f.suffix == ".py" and "__pycache__" not in f.parts]
        assert all(f in kept for f in python), f"COPY {source}: some of its modules are excluded"


def test_the_image_copies_every_package_the_project_installs_and_its_build_files() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    packages = {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}
    packages |= {f"{module}.py" for module in setuptools.get("py-modules", [])}
    copied = {source.rstrip("/") for source in _copied_sources()}

    assert packages <= copied, f"packages not copied into the image: {sorted(packages - copied)}"
    assert {"pyproject.toml", _pyproject()["project"]["readme"]} <= copied  # the build reads both


def test_the_image_installs_the_project_as_the_readme_does_with_the_production_extra() -> None:
    readme = (ROOT / "README.md").read_text()
    install = " ".join(_all("RUN"))
    extras = _pyproject()["project"]["optional-dependencies"]

    # a venv, pip, the project (command 1 says what it installs and shows pip's progress)
    assert re.search(r"python3 -m venv \.venv && .*\.venv/bin/pip install [-\w ]*-e \. ", readme)
    assert "python -m venv" in install
    assert 'pip install ".[production]"' in install
    # Dagster's libraries are released with it (1.13.27 <-> 0.29.27): the same series, the same floor
    dagster = next(d for d in _pyproject()["project"]["dependencies"] if re.match(r"dagster[<>=]", d))
    found = re.fullmatch(r"dagster>=1\.(\d+)\.(\d+),<1\.(\d+)", dagster)
    assert found and int(found[3]) == int(found[1]) + 1, dagster  # one minor series, from a floor
    series = int(found[1]) + 16
    libraries = f">=0.{series}.{found[2]},<0.{series + 1}"
    assert sorted(extras["production"]) == [f"dagster-k8s{libraries}", f"dagster-postgres{libraries}"]
    for requirement in [*_pyproject()["project"]["dependencies"], *extras["dev"]]:
        if requirement.startswith("dagster-"):  # the webserver and graphql as dagster, the rest as libraries
            assert requirement.endswith((dagster.removeprefix("dagster"), libraries)), requirement


def test_the_image_runs_as_a_numeric_non_root_user_with_a_writable_dagster_home() -> None:
    (user,) = _all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # runAsNonRoot can verify a number only
    assert "DAGSTER_HOME=/opt/dagster/dagster_home" in " ".join(_all("ENV"))
    assert 'chown -R dagster:dagster "$DAGSTER_HOME"' in " ".join(_all("RUN"))


def test_the_image_has_no_entrypoint_that_would_prefix_the_charts_commands() -> None:
    assert _all("ENTRYPOINT") == []
    (cmd,) = _all("CMD")
    assert json.loads(cmd)[0] == "dagster"
    assert _all("EXPOSE") == ["4000"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def code_server(sandbox: SandboxHandle, tmp_path: Path) -> Iterator[int]:
    """The image's command run here, on a free loopback port; returns the port.

    ``--heartbeat`` makes the server stop by itself 60 s after the test process is gone, however it
    ended; the test stops it at once otherwise.
    """
    command = json.loads(_all("CMD")[0])
    port = _free_port()
    command[command.index("-h") + 1] = "127.0.0.1"
    command[command.index("-p") + 1] = str(port)
    command[0] = str(BIN / "dagster")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VISIBILITY_", "DAGSTER_"))},
        "VISIBILITY_API_URL": sandbox.url,
        "VISIBILITY_API_KEY": sandbox.keys["workspace"],
        "VISIBILITY_WAREHOUSE": f"duckdb:///{tmp_path / 'image.duckdb'}",
        "DAGSTER_HOME": str(tmp_path),
    }
    process = subprocess.Popen(
        [*command, "--heartbeat", "--heartbeat-timeout", "60"],
        cwd=tmp_path,  # the installed package is served, not the checkout's working directory
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)
        assert process.stderr is not None
        process.stderr.close()


def test_the_image_command_serves_the_definitions_and_passes_the_charts_readiness_probe(
    code_server: int,
) -> None:
    from dagster import deserialize_value

    # what the code server serves, asked as the webserver asks it: only Dagster's gRPC client can
    from dagster._grpc.client import DagsterGrpcClient

    probe = [str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(code_server)]  # the chart's
    deadline = time.monotonic() + 90
    while True:
        result = subprocess.run(probe, capture_output=True, timeout=30, check=False)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.returncode == 0, result.stderr.decode()[-2000:]

    # the code server answers while it still loads the definitions in its own process
    client = DagsterGrpcClient(port=code_server, host="127.0.0.1")
    while True:
        client.heartbeat("test")
        listing = deserialize_value(client.list_repositories())
        if hasattr(listing, "repository_symbols") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert hasattr(listing, "repository_symbols"), listing
    assert [symbol.attribute for symbol in listing.repository_symbols] == ["defs"]
    assert listing.executable_path.startswith(str(BIN))  # runs start with the image's own Python


def _docker_daemon() -> str | None:
    """Why the image cannot be built here, or None when a Docker daemon answers."""
    docker = shutil.which("docker")
    if docker is None:
        return "no docker command on this machine"
    result = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        return "no Docker daemon reachable (`docker info` failed): the image build is checked where one is"
    return None


@pytest.mark.slow
def test_the_image_builds_and_its_python_imports_the_definitions() -> None:
    reason = _docker_daemon()
    if reason:
        pytest.skip(reason)
    tag = f"visibility-sync-test:{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(
            ["docker", "build", "-f", str(DOCKERFILE), "-t", tag, str(ROOT)],
            check=True,
            timeout=1200,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )
        user = subprocess.run(
            ["docker", "run", "--rm", "--entrypoint", "id", tag, "-u"],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout.strip()
        assert user == "10001"
        imported = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                tag,
                "python",
                "-c",
                "import dagster_k8s, dagster_postgres, pipelines.jobs",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert imported.returncode == 0, imported.stderr
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=120, check=False)
