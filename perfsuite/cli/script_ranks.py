"""``--nproc-per-node`` and ``--scaling-rounds`` for commands that run a user's script (exec, doctor).

The script is launched unchanged through torch's own launcher (perfsuite.harness.ranks.script);
the flags mean what they mean for ``perfsuite run``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_rank_arguments(p: argparse.ArgumentParser) -> None:
    from perfsuite.cli.run import _count

    ranks = p.add_argument_group("ranks (a DDP script under torchrun; docs/exec.md)")
    ranks.add_argument(
        "--nproc-per-node",
        type=_count(1),
        default=1,
        metavar="N",
        help="launch the script on N ranks through torch.distributed.run, as torchrun does (RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR/PORT set; the script calls init_process_group itself); one merged Result",
    )
    ranks.add_argument(
        "--scaling-rounds",
        type=_count(0),
        default=0,
        metavar="R",
        help="with --nproc-per-node: also measure scaling_efficiency from R interleaved one-rank and N-rank launches",
    )
    ranks.add_argument(
        "--omp-threads",
        type=_count(1),
        default=None,
        metavar="T",
        help="OMP_NUM_THREADS per rank (default: the usable cores over the ranks)",
    )


def wants_ranks(args: argparse.Namespace) -> bool:
    return bool(args.nproc_per_node > 1 or args.scaling_rounds)


def run_ranks(script: Any, spec: Any, args: argparse.Namespace, command: str) -> Any:
    """The script on ``--nproc-per-node`` ranks: the merged Result."""
    from perfsuite.harness.ranks.script import run_script_distributed

    return run_script_distributed(
        script,
        spec,
        args.nproc_per_node,
        omp_threads=args.omp_threads,
        scaling_rounds=args.scaling_rounds,
        log=lambda line: print(f"perfsuite {command}: {line}", file=sys.stderr, flush=True),
    )
