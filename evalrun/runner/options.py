"""Everything a run is told from outside the eval file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evalrun.launcher.sandbox import Requested
from evalrun.results.stats import RUN_SEED
from evalrun.targets import StoreOptions

#: the reports a run writes unless told (``--format``; docs/reports.md)
DEFAULT_REPORT_FORMATS = ("md", "html", "junit")


@dataclass
class RunOptions:
    out: Path
    #: ``out`` is the default name: a ``-2``, ``-3`` ... suffix when taken (else it must be empty)
    unique_out: bool = False
    #: the target that answers; several: a matrix run, one column each (docs/results.md)
    target: str | list[str] | None = None
    judge: str | None = None
    targets_file: Path | None = None
    workers: int = 4
    #: the cap on the eval's own graders' processes, None for the default (launcher/cap.py)
    max_processes: int | None = None
    filters: list[str] = field(default_factory=list)
    repeat: int = 1
    threshold: float | None = None
    max_errors: int = 0
    shard: tuple[int, int] | None = None
    resume: bool = False
    only_ids: set[str] | None = None
    #: only the first N selected cases (after filters, shard and only_ids)
    limit: int | None = None
    stores: StoreOptions = field(default_factory=StoreOptions)
    quiet: bool = False
    report_formats: tuple[str, ...] = DEFAULT_REPORT_FORMATS
    sandbox: Requested = "auto"
    #: ``local`` (this process) or ``ray`` (docs/distributed.md)
    executor: str = "local"
    ray_address: str | None = None
    #: send OpenTelemetry spans (docs/otel.md); also on when OTEL_EXPORTER_OTLP_ENDPOINT is set
    otel: bool = False
    #: bootstrap seed of the score interval (``--seed``; docs/config.md "Randomness")
    seed: int = RUN_SEED
    #: leave each case's workspace in place after the case (docs/agents.md, "Workspaces")
    keep_workspaces: bool = False
