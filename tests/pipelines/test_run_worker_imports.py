"""What every run process imports before its first step (Dagster's run worker loads the code location
while the run queue waits for it): the connector's libraries, none a run may not need."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.doc_blocks import ROOT

#: Loaded by the steps that need them only: the report (matplotlib), users' own assets (pandas),
#: the BigQuery warehouse, dbt (not a dependency of a run at all).
NOT_AT_LOAD = ("matplotlib", "pandas", "google.cloud.bigquery", "dbt")

_PROBE = """
import json, sys
from pipelines.definitions import defs
defs.get_repository_def()
print(json.dumps([name for name in sys.argv[1:] if name in sys.modules]))
"""


def test_loading_the_code_location_imports_no_library_a_run_may_not_need() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *NOT_AT_LOAD], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
