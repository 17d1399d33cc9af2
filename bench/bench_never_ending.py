"""A service that never ends a walk: requests, seconds and memory until the sync's request budget stops it.

Claim: a walk whose every page has a new cursor, new rows and new answers ends at the request
budget with ``RequestBudgetExceeded``, and the RSS growth over its second half stays under 5% of
what keeping its rows would take (measured in the same run). The sandbox on loopback behind a
transport that invents the pages; the rows are consumed and dropped, as the spool does.

Run: ``.venv/bin/python bench/bench_never_ending.py [--floor N]``; prints the figures (no file).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.proxy import ENDLESS_PREFIX, endless_page  # noqa: E402
from resources.api.budget import RequestBudget  # noqa: E402
from resources.api.client import VisibilityClient  # noqa: E402
from resources.api.errors import RequestBudgetExceeded  # noqa: E402
from sandbox.config import SandboxConfig  # noqa: E402
from sandbox.faults import FaultsConfig  # noqa: E402
from sandbox.limits import LimitsConfig  # noqa: E402
from sandbox.testing import run_sandbox  # noqa: E402


class InventingTransport(httpx.HTTPTransport):
    """Forwards to the sandbox; every mentions page goes on for ever with new rows and answers
    (:func:`bench.proxy.endless_page`): a service inventing rows for ever."""

    def __init__(self) -> None:
        super().__init__()
        self.pages = itertools.count()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.params.get("cursor", "").startswith(ENDLESS_PREFIX):
            params = request.url.params.remove("cursor")
            request = httpx.Request(
                request.method, request.url.copy_with(params=params), headers=request.headers
            )
        response = super().handle_request(request)
        response.read()
        response.close()
        if "/mentions" not in request.url.path or response.status_code != 200:
            return response
        body = endless_page(json.loads(response.content), next(self.pages), True, True)
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-encoding")
        }
        return httpx.Response(200, headers=headers, stream=httpx.ByteStream(json.dumps(body).encode()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floor", type=int, default=4000, help="the sync's request floor (default 4000)")
    args = parser.parse_args(argv)
    config = SandboxConfig(
        seed=7,
        today=dt.date(2026, 11, 1),
        limits=LimitsConfig(rate_per_second=1e5, burst=100_000, endpoint_limit=100_000, max_concurrent=1000),
        faults=FaultsConfig(profile="none"),
    )
    with run_sandbox(config) as sandbox:
        prompt = sandbox.world.brands[0].prompts[0].id
        budget = RequestBudget(8, request_floor=args.floor, requests_per_call=20)
        budget.allow_planned_calls(1, "prompt_mentions")
        transport = InventingTransport()
        samples: list[tuple[int, float]] = []
        rows = 0
        row_bytes = 0
        started = time.monotonic()
        with VisibilityClient(
            sandbox.url, sandbox.keys["workspace"], transport=transport, budget=budget
        ) as api:
            walk = api.list_prompt_mentions(
                prompt, start=dt.date(2026, 10, 1), end=dt.date(2026, 10, 31), limit=100
            )
            try:
                for row in walk:
                    rows += 1
                    if rows <= 1000:
                        row_bytes += len(json.dumps(row))
                    if rows % 5000 == 0:
                        samples.append((budget.requests_taken, psutil.Process().memory_info().rss / 2**20))
                error = None
            except RequestBudgetExceeded as exc:
                error = exc
        seconds = time.monotonic() - started
    assert error is not None, "the walk ended by itself: the proxy did not invent pages"
    per_row = row_bytes / min(rows, 1000)
    half = samples[len(samples) // 2]
    growth = samples[-1][1] - half[1]
    kept = (rows / 2) * per_row / 2**20  # what keeping the second half's rows would add, MB
    print(
        f"stopped: {type(error).__name__} after {error.requests} requests, "
        f"walk pages {error.pages}, {rows:,} rows"
    )
    print(f"message: {str(error)[:300]}")
    print(f"seconds: {seconds:.1f}")
    print(
        f"RSS: {samples[0][1]:.1f} MB at {samples[0][0]} requests, {half[1]:.1f} MB at {half[0]}, "
        f"{samples[-1][1]:.1f} MB at {samples[-1][0]}"
    )
    print(
        f"growth over the second half: {growth:.1f} MB; keeping those rows would add {kept:.1f} MB "
        f"({per_row:.0f} bytes/row as JSON); ratio {growth / kept:.3f}"
    )
    ok = growth < 0.05 * kept
    print("claim holds" if ok else "CLAIM FAILS")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
