"""``perfsuite monitor [--interval S] [--duration S] [--pid PID] [--png FILE]``: a GPU's NVML readings, live.

A thin shell over :mod:`perfsuite.tools.monitor`. One line per sample (a live line at a terminal), a
summary at the end (Ctrl-C ends it too). Exit status: 0 after the summary; 2 without NVML, a driver
or the GPU asked for, saying which, or on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TextIO

from perfsuite.errors import PerfsuiteError

HELP = "watch a GPU's NVML readings live (kernel-active time, power vs limit, memory, clocks, GPM); then a summary"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between samples (default 1)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="stop after S seconds (default: Ctrl-C)")
    p.add_argument("--pid", type=int, default=None, help="stop when process PID exits, and show its GPU memory")
    p.add_argument("--gpu", type=int, default=0, metavar="INDEX", help="NVML index of the GPU (default 0)")
    p.add_argument("--png", type=Path, default=None, metavar="FILE", help="write the readings over time as a PNG")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the samples and summary as JSON")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from perfsuite.tools.monitor import format_summary, monitor, open_backend, write_png

    out = out or sys.stdout
    if not (math.isfinite(args.interval) and args.interval > 0):
        raise PerfsuiteError(f"--interval {args.interval}: write a number of seconds above 0, e.g. --interval 1")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise PerfsuiteError(f"--duration {args.duration}: write a number of seconds above 0, or leave it out")
    if args.gpu < 0 or (args.pid is not None and args.pid <= 0):
        raise PerfsuiteError("--gpu takes an index >= 0 and --pid a process id > 0")
    backend = open_backend(args.gpu)
    session = monitor(backend, args.interval, args.duration, args.pid, on_row=lambda text: print(text, file=out))
    print(format_summary(session), file=out)
    if args.png is not None:
        try:
            print(f"wrote {write_png(session, args.png)}", file=out)
        except ImportError:
            print(f"did not write {args.png}: the chart needs matplotlib (pip install perfsuite[charts])", file=out)
    if args.json is not None:
        from perfsuite.core.tmpfiles import write_text_atomic

        write_text_atomic(args.json, json.dumps(session.to_dict(), indent=2) + "\n")
        print(f"wrote {args.json}", file=out)
    return 0
