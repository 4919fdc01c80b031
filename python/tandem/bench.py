"""tandem.bench: fair speed and cost comparisons (`tandem bench`) from Python.

    report = tandem.bench.run(models=["cnn"], batch_sizes=[64, 256])
    table = pandas.DataFrame(report.rows)      # one row per configuration, measured or estimated
    table[["device_name", "samples_per_second", "cost_per_1000_steps"]]

Measured rows are this machine's devices; estimates (``kind == "estimate"``) project the measured
step onto other hardware (GPUs, TPUs) by the roofline of its ops, scaled by what was measured,
and are labelled as such. Costs come from Tandem's price table (``tandem bench --prices``).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Sequence

from tandem import _native


class Report:
    """A bench report: ``rows`` for pandas, ``markdown()`` and ``html()`` as `tandem bench`
    writes them, and ``json`` (what ``tandem bench --json`` writes)."""

    def __init__(self, report_json: str, log: str) -> None:
        self.json = report_json
        self.log = log
        self._report: Dict[str, Any] = json.loads(report_json)

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """One flat dict per configuration (step-time lists left out), costs as cost_* keys."""
        flat = []
        for row in self._report["rows"]:
            entry = {
                key: value for key, value in row.items() if not isinstance(value, (list, dict))
            }
            for key, value in row.get("cost", {}).items():
                entry[f"cost_{key}"] = value
            step = row.get("step", {})
            entry["step_seconds_median"] = step.get("median")
            flat.append(entry)
        return flat

    @property
    def skipped(self) -> List[Dict[str, str]]:
        return list(self._report.get("skipped", []))

    def markdown(self) -> str:
        return _native.bench.markdown(self.json)

    def html(self) -> str:
        return _native.bench.html(self.json)

    def _repr_markdown_(self) -> str:
        return self.markdown()


def run(
    models: Sequence[str] = ("cnn",),
    devices: Sequence[str] = ("cpu",),
    precisions: Sequence[str] = ("fp32",),
    batch_sizes: Sequence[int] = (64,),
    estimates: Sequence[str] = ("all",),
    peers: Sequence[str] = (),
    threads: int = 0,
    steps: int = 20,
    windows: int = 3,
    peer_python: Optional[str] = None,
) -> Report:
    """Trains each model on each device, precision and batch size for ``windows`` timed windows
    of ``steps`` steps (warm-up excluded), adds estimates for other hardware and the peers
    ("tf", "tf-xla", "torch") on the same configurations."""
    report_json, log = _native.bench.run(
        list(models),
        list(devices),
        list(precisions),
        [int(b) for b in batch_sizes],
        list(estimates),
        list(peers),
        int(threads),
        int(steps),
        int(windows),
        peer_python or sys.executable,
    )
    return Report(report_json, log)


def workloads() -> List[str]:
    return list(_native.bench.workloads())
