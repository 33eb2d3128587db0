"""The run path: one function, :func:`run_recipe`, that ``trickbag train``, sweep trials, ablation cells and
``lr-find`` all call; the run directory and its lock; pre-flight; summaries; eval and predict."""
