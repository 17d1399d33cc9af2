"""Serve the sandbox in the foreground (``visibility-sync sandbox``, ``python -m sandbox``)."""

from __future__ import annotations

import sys

import uvicorn

from sandbox.app import create_app
from sandbox.config import SandboxConfig


def banner(config: SandboxConfig, url: str, keys: dict[str, str]) -> str:
    """What a user needs to start: the URL, the keys by role, and the admin endpoints."""
    lines = [
        f"Visibility sandbox serving {url}  (seed {config.seed}, size {config.size}, "
        f"faults {config.faults.profile}, data {config.history_start} .. {config.today} exclusive)",
        "",
        "Try it:",
        f"  export VISIBILITY_API_URL={url}",
        f"  export VISIBILITY_API_KEY={keys['workspace']}",
        "",
        "Keys by role:",
        *(f"  {role:<16} {value}" for role, value in keys.items()),
        "",
        f"Admin: {url}/_sandbox/stats  {url}/_sandbox/keys  {url}/openapi.json",
        "Press Ctrl+C to stop.",
    ]
    return "\n".join(lines)


def serve_forever(config: SandboxConfig | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Print the URL and the demo keys, then serve until interrupted."""
    config = config or SandboxConfig()
    app = create_app(config)
    url = f"http://{host}:{port}"
    sys.stdout.write(banner(config, url, app.state.sandbox.world.keys_by_role) + "\n")
    sys.stdout.flush()
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
