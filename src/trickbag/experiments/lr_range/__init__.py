"""LR range test (Smith 2017, "Cyclical Learning Rates for Training Neural Networks", section 3.3).

Train for ``steps`` optimizer updates while the learning rate grows exponentially from ``start`` to
``end``, record the loss of every update, smooth it with a bias-corrected exponential moving
average, stop as soon as the smoothed loss exceeds ``diverge`` times its minimum (or a loss is not
finite), and suggest an LR by one of two rules (:func:`suggest_lr`).

One piece of arithmetic (:class:`RangeTest`), two drivers:

* :func:`lr_find` — in a hand-written loop: any model, optimizer and loader; the model, the
  optimizer and torch's RNG are put back afterwards;
* :class:`LRFinder` — a plug-in on the run path; :func:`lr_find_recipe` (``trickbag lr-find``)
  runs a recipe with it, so the recipe's precision, SAM, mixup and every other trick apply.

The smoothing lags the raw loss by about ``beta / (1 - beta)`` steps, which shifts the curve towards
larger LRs; the default ``beta = 0.9`` keeps that lag at ~10 steps (``0.98``, common elsewhere, lags
~50 steps, 1.75 decades of a 200-step sweep over 7 decades).

(The package is not called ``lr_find``: a submodule of that name would replace the function
``trickbag.experiments.lr_find`` on the parent package once imported.)
"""

from trickbag.experiments.lr_range.finder import LRFinder, finder_recipe, lr_find_recipe
from trickbag.experiments.lr_range.loop import lr_find
from trickbag.experiments.lr_range.plot import plot_lr_find, write_lr_find
from trickbag.experiments.lr_range.range_test import (
    RULE_TEXT,
    RULES,
    LRFindResult,
    RangeTest,
    Rule,
    set_group_lrs,
    smooth_losses,
    suggest_lr,
)

__all__ = ["lr_find", "LRFinder", "lr_find_recipe", "finder_recipe", "RangeTest", "LRFindResult", "smooth_losses",
           "suggest_lr", "set_group_lrs", "plot_lr_find", "write_lr_find", "Rule", "RULES", "RULE_TEXT"]
