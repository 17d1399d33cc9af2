"""msgspec builds a struct type's information on its first use, and two threads using a new type at
once can crash the process (a segmentation fault in ``msgspec._core``). The page checks
(``Endpoint.validate_rows``) run in the client's fetch threads, each on types made for an endpoint:
each type is used once, in one thread, before any page. Run in a fresh interpreter with the GIL
handed over as often as it can be, many times over, new types each time: without the warm-up this
crashed within seconds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import sys, threading
    sys.setswitchinterval(1e-6)
    from resources.api.endpoints import Endpoint

    rows = [{"id": "r1", "n": 1, "x": 0.5, "t": "a", "b": True}] * 4
    fields = {"id": "string", "n": "integer", "x": "number", "t": "string", "b": "boolean"}
    for round in range(int(sys.argv[1])):
        endpoint = Endpoint("GET", f"/v1/probe{round}", fields, rows=True)
        start = threading.Barrier(8)

        def page() -> None:
            start.wait()
            endpoint.validate_rows(rows)

        threads = [threading.Thread(target=page) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print("every page checked")
    """
)


def test_fetch_threads_checking_their_first_pages_at_once_do_not_crash_the_process() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", PROGRAM, "1500"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "every page checked" in done.stdout
