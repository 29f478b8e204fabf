"""A job on several ranks: which device and how many threads each rank gets, and what DDP needs of the job.

The launcher (perfsuite.harness.ranks.launch) plans devices and threads before
any rank starts; each rank (perfsuite.harness.ranks.main) then shards a
reference pipeline's loader with a DistributedSampler and wraps its model in
DistributedDataParallel, or checks that a user's job did both itself, as the
user's own training script does under torchrun.
"""

from __future__ import annotations

from typing import Any

from perfsuite.errors import DeviceError, JobError


def backend_for(device: str) -> str:
    """NCCL for CUDA ranks, gloo for CPU ranks (torch.distributed's own advice)."""
    return "nccl" if device.startswith("cuda") else "gloo"


def rank_devices(device: str, nproc: int, gpu_count: int, share_gpus: bool = False) -> list[str]:
    """The device of each local rank: ``cuda:<local rank>`` on CUDA, ``cpu`` on the CPU.

    Ranks that would share one GPU are refused unless ``share_gpus``: each would
    get a fraction of the device and the run would measure contention, not scaling.
    """
    if nproc < 1:
        raise DeviceError(f"nproc_per_node={nproc}; write 1 or more")
    if not device.startswith("cuda"):
        return ["cpu"] * nproc
    base, _, index = device.partition(":")
    if gpu_count < 1:
        raise DeviceError(f"device {device!r} on {nproc} ranks, but torch sees no CUDA device; use cpu or auto")
    if index and nproc > 1:
        if not share_gpus:
            raise DeviceError(
                f"device {device!r} on {nproc} ranks would put every rank on GPU {index}; write device='cuda' "
                "(rank k on GPU k), or share_gpus=True (--share-gpu) if sharing one GPU is what you mean to measure"
            )
        return [device] * nproc
    if nproc > gpu_count and not share_gpus:
        raise DeviceError(
            f"nproc_per_node={nproc} but torch sees {gpu_count} CUDA device(s): ranks would share GPUs and the "
            f"run would measure contention, not scaling; write nproc_per_node={gpu_count} or less, or "
            "share_gpus=True (--share-gpu) if that is what you mean to measure"
        )
    return [f"{base}:{k % gpu_count}" for k in range(nproc)]


def plan_threads(nproc: int, workers: int, cores: int) -> int:
    """Intra-op threads per rank (OMP_NUM_THREADS) so ranks x (threads + workers) fit the usable cores.

    Each rank gets its share of the cores, less one per DataLoader worker (a
    worker runs one thread); never fewer than one. When even one thread per
    rank does not fit, the run is oversubscribed and ``cpu_oversubscription``
    says by how much.
    """
    if nproc < 1 or cores < 1:
        raise DeviceError(f"cannot plan threads for nproc_per_node={nproc} on {cores} core(s)")
    return max(1, cores // nproc - max(0, workers))


# --------------------------------------------------------------------------- inside a rank


def shard_pipeline(pipeline: Any, rank: int, world: int, seed: int) -> None:
    """Give a reference pipeline's loader a DistributedSampler: this rank's shard, a new order per epoch."""
    from torch.utils.data.distributed import DistributedSampler

    from perfsuite.harness.pipeline import build_loader

    loader = pipeline.loader
    sampler: DistributedSampler[Any] = DistributedSampler(
        loader.dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed
    )
    pipeline.loader = build_loader(
        loader.dataset,
        pipeline.knobs,
        pipeline.batch_size,
        seed,
        timeout_s=loader.timeout or None,
        sampler=sampler,
    )


def wrap_pipeline(pipeline: Any) -> None:
    """Wrap a reference pipeline's model in DistributedDataParallel, with the pipeline's ``ddp_options``."""
    from torch.nn.parallel import DistributedDataParallel

    device = pipeline.device
    ids = [device.index or 0] if device.type == "cuda" else None
    pipeline.model = DistributedDataParallel(pipeline.model, device_ids=ids, **pipeline.ddp_options)


def check_job(job: Any, world: int) -> None:
    """A user's job on several ranks must bring DistributedDataParallel itself, as its torchrun script does."""
    from torch.nn.parallel import DistributedDataParallel

    if world > 1 and not isinstance(job.model, DistributedDataParallel):
        raise JobError(
            f"job {job.name!r} runs on {world} ranks but Job(model=...) is a {type(job.model).__name__}, not a "
            "DistributedDataParallel module: each rank would train alone. In your job factory write "
            "model = torch.nn.parallel.DistributedDataParallel(model) (the process group is initialised before "
            "the factory is called), use it in the step, and pass Job(model=model)"
        )
