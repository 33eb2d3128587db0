"""The run path: :func:`~trickbag.runs.run.run_recipe`, run directory and lock, pre-flight, summary, eval/predict.

``trickbag train``, sweep trials, ablation cells and ``lr-find`` all call the one function
:func:`trickbag.runs.run.run_recipe`; they differ only in the plug-ins they add.
"""
