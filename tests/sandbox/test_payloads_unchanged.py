"""Performance work on the sandbox changes nothing it serves.

``payload_digests.json`` holds, for a fixed walk over every endpoint (parameters, cursors, errors,
writes, audits, hostile faults, limits and quota; see ``payload_walk.py``), one digest per request of
its status, headers and parsed body, recorded with the code before the JSON encoder and the row
builders were made faster. The same walk must give the same digests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from sandbox.testing import SandboxHandle
from tests.sandbox import payload_walk

DIGESTS = Path(__file__).with_name("payload_digests.json")


def test_every_endpoint_serves_the_same_statuses_headers_and_bodies_as_before(
    sandbox_factory: Callable[..., SandboxHandle],
) -> None:
    expected = json.loads(DIGESTS.read_text())
    actual = payload_walk.collect(sandbox_factory)
    for name, digests in expected.items():
        differing = [
            i
            for i, (a, b) in enumerate(zip(actual[name]["records"], digests["records"], strict=True))
            if a != b
        ]
        assert not differing, f"scenario {name}: requests {differing} answer differently"
