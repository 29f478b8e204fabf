"""``perfsuite ab``: two revisions interleaved on one machine, each in its own worktree and environment."""
