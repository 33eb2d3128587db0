"""Trick ablation: which of these tricks help on *this* recipe and data, by how much, and at what cost.

``trickbag ablate RECIPE --tricks mixup,ema,label_smoothing --seeds 5`` trains every *variant* of the
recipe with every seed:

* :mod:`.variants` — tricks (``--tricks``) and the variants of ``--mode leave-one-out`` / ``add-one``;
* :mod:`.cells` — one *cell* = (variant, seed) is one run on the run path, in its own process and
  run directory ``OUT/runs/<variant>_s<seed>``; its metric (default ``test/acc`` of ``best.pt``),
  training wall time and peak resident memory are recorded;
* :mod:`.run` — :func:`run_ablation`: the cells, ``--jobs`` at a time, each recorded in
  ``OUT/ablation.json`` (rewritten atomically) as it ends, so a killed ablation started again with
  the same arguments skips the finished cells;
* :mod:`.analysis` — the table comparing each variant with the reference seed by seed (paired
  Student-t interval, :mod:`trickbag.experiments.stats`), printed and written as ``OUT/ablation.md``
  / ``OUT/ablation.csv``, and ``OUT/ablation.png`` (the metric with error bars, time per variant).
"""

from trickbag.experiments.ablate.analysis import ablation_rows, format_table, plot_ablation
from trickbag.experiments.ablate.run import AblationResult, CellCallback, run_ablation
from trickbag.experiments.ablate.variants import Trick, Variant, ablation_variants, cell_name, parse_tricks

__all__ = ["Trick", "Variant", "parse_tricks", "ablation_variants", "cell_name", "run_ablation", "AblationResult",
           "CellCallback", "ablation_rows", "format_table", "plot_ablation"]
