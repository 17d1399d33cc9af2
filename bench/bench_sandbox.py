"""Benchmark of the sandbox's large workspace: start-up, memory, and latency of heavy pages.

Run: ``.venv/bin/python bench/bench_sandbox.py [--prompts 60] [--no-write]``. ``python -m sandbox
--size large`` in its own process (no GIL shared with the client), measured over HTTP on loopback:
start-up and RSS; 999-row mention pages (120 days, all engines) warm and cold against 100 ms;
competitor trends and citation URLs over 30 days; the server process's CPU per warm page served
over HTTP (from the kernel's counters: what it takes from a machine it shares with the connector);
the CPU time to build and serialize a warm page in-process (the work itself, free of a shared
machine's CPU wait). Under ``## Sandbox``.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes as P
from bench.processes import SANDBOX_TODAY, sandbox_service
from sandbox.config import SandboxConfig
from sandbox.encoding import JsonResponse
from sandbox.faults import FaultsConfig
from sandbox.instance import Sandbox
from sandbox.params import Window
from sandbox.world import Brand, World

TARGET_MS = 100.0
TODAY = SANDBOX_TODAY


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(client: httpx.Client, path: str, params: dict[str, object]) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    response = client.get(path, params=params)
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return elapsed, response


def page_cpu_ms(sb: Sandbox, brand: Brand, config: SandboxConfig) -> list[float]:
    """CPU time (this thread only) to build and serialize warm 999-row pages in-process: the work
    itself, without the wait for a CPU that wall-clock latency on a shared machine includes."""
    window = Window(config.history_start, TODAY)
    out = []
    for prompt in brand.prompts[:60]:
        start = time.thread_time()
        page = sb.views.mentions(brand, prompt.index, window, None, 0, 999)
        JsonResponse({"data": page.rows, "has_more": page.has_more, "next_cursor": None})
        if len(page.rows) == 999:
            out.append((time.thread_time() - start) * 1000)
    return out


def run(prompts_per_brand: int) -> dict[str, float]:
    config = SandboxConfig(size="large", today=TODAY, faults=FaultsConfig(profile="none"))
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    logs = P.work_folder("bench-sandbox-")
    # in its own process (no GIL shared with this client), its limits out of the way
    with sandbox_service(size="large", rate=1e6, max_concurrent=1000, log_dir=logs) as sb:
        startup_s = time.perf_counter() - started
        assert sb.service is not None
        server = psutil.Process(sb.service.pid)
        after_start = server.memory_info().rss / 1e6
        world = World(config)  # the same seed and size: ids to request, generated here, not served
        brands = [b for b in world.brands if b.workspace_id == world.workspaces["main"].id]
        window = {"from": config.history_start.isoformat(), "to": TODAY.isoformat(), "limit": 999}
        cold, warm, trends_cold, trends_warm, urls = [], [], [], [], []
        server_cpu_warm: list[float] = []
        headers = {"Authorization": f"Bearer {sb.key}"}
        with httpx.Client(base_url=sb.url, headers=headers, timeout=60) as client:
            client.get("/v1/brands").raise_for_status()  # connection and first-request set-up
            for brand in brands:
                for i, prompt in enumerate(brand.prompts[:prompts_per_brand]):
                    cpu_before = sb.cpu_seconds()  # in 10 ms ticks: only a sum over pages means much
                    elapsed, response = timed(client, f"/v1/prompts/{prompt.id}/mentions", window)
                    if len(response.json()["data"]) == 999:  # a few rarely answered prompts hold fewer
                        (cold if i == 0 else warm).append(elapsed)
                        if i:
                            server_cpu_warm.append((sb.cpu_seconds() - cpu_before) * 1000)
                path = f"/v1/brands/{brand.id}/competitors/trends"
                trends_cold.append(timed(client, path, {})[0])
                trends_warm.extend(timed(client, path, {})[0] for _ in range(3))
                urls.append(timed(client, f"/v1/brands/{brand.id}/citations/urls", {"limit": 2000})[0])
        after_run = server.memory_info().rss / 1e6
    cpu = page_cpu_ms(Sandbox(config), brands[0], config)
    return {
        "cpu_median_ms": statistics.median(cpu),
        "server_cpu_per_page_ms": sum(server_cpu_warm) / len(server_cpu_warm),
        "cpu_p95_ms": p95(cpu),
        "load_before": load_before,
        "startup_s": startup_s,
        "rss_after_start_mb": after_start,
        "rss_after_run_mb": after_run,
        "pages_warm": len(warm),
        "warm_median_ms": statistics.median(warm),
        "warm_p95_ms": p95(warm),
        "cold_median_ms": statistics.median(cold),
        "cold_max_ms": max(cold),
        "trends_cold_median_ms": statistics.median(trends_cold),
        "trends_warm_median_ms": statistics.median(trends_warm),
        "urls_median_ms": statistics.median(urls),
    }


def render(f: dict[str, float]) -> str:
    ratio_median = f["warm_median_ms"] / TARGET_MS
    ratio_p95 = f["warm_p95_ms"] / TARGET_MS
    return "\n".join(
        [
            "## Sandbox",
            "",
            f"Measured by `bench/bench_sandbox.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC "
            f"({os.cpu_count()} CPUs, load average {f['load_before']:.1f} at start: other work shares the "
            "machine), large workspace (5 brands x 300 prompts x 7 engines), over HTTP on loopback.",
            "",
            "| figure | value | target | ratio |",
            "|---|---|---|---|",
            f"| 999-row mention page, warm, median ({int(f['pages_warm'])} pages) "
            f"| {f['warm_median_ms']:.1f} ms | 100 ms | {ratio_median:.2f} |",
            f"| 999-row mention page, warm, p95 | {f['warm_p95_ms']:.1f} ms | 100 ms | {ratio_p95:.2f} |",
            "| 999-row mention page, warm: the server process's CPU per page over HTTP (its user + system "
            f"time over the warm pages), mean | {f['server_cpu_per_page_ms']:.1f} ms | - | - |",
            "| 999-row mention page, CPU time to build and serialize (no HTTP, no CPU wait), median / p95 "
            f"| {f['cpu_median_ms']:.1f} / {f['cpu_p95_ms']:.1f} ms | 100 ms "
            f"| {f['cpu_median_ms'] / TARGET_MS:.2f} / {f['cpu_p95_ms'] / TARGET_MS:.2f} |",
            "| 999-row mention page, cold (first page of a brand: generates the blocks its rows need), "
            f"median "
            f"| {f['cold_median_ms']:.0f} ms | - | - |",
            "| competitor trends, 30 days all engines, cold / warm median "
            f"| {f['trends_cold_median_ms']:.0f} ms / {f['trends_warm_median_ms']:.1f} ms | - | - |",
            f"| citation URLs, 30 days, limit 2000, median | {f['urls_median_ms']:.1f} ms | - | - |",
            "| start-up of `python -m sandbox --size large` until it answers "
            f"| {f['startup_s']:.2f} s | - | - |",
            "| server process RSS: after start / after the run (every block read stays cached) "
            f"| {f['rss_after_start_mb']:.0f} / {f['rss_after_run_mb']:.0f} MB | - | - |",
            "",
            "Warm means the (brand, day, engine) blocks of the window were generated by an earlier request;"
            " a sync reads many prompts of one brand over the same window, so all but its first page"
            " are warm.",
            "",
        ]
    )


def main() -> None:
    parser = P.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=60, help="prompts per brand to page through")
    args = parser.parse_args()
    P.publish("## Sandbox", render(run(args.prompts)), not args.no_write)


if __name__ == "__main__":
    main()
