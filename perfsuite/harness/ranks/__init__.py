"""The same run on several ranks under torchrun (DDP): one Result with each rank's figures.

``launch`` plans and starts ``torch.distributed.run`` and measures scaling efficiency, ``main`` is what each rank
runs, ``ddp`` wraps a reference pipeline's model and sampler, ``script`` runs a user's script on each rank,
``supervise`` watches the ranks for a hang or a death, and ``merge`` gathers the ranks' reports into one Result.
It may import the run, the script path and the fault catalogue; nothing below it imports it.
"""
