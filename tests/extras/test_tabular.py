"""bin_feature / correlation_heatmap against numpy, scikit-learn, scipy and a hand-computed WoE table."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.tree import DecisionTreeClassifier

from trickbag.extras.tabular import _draw_heatmap, bin_feature, correlation_heatmap


@pytest.fixture
def skewed():
    rng = np.random.default_rng(0)
    return rng.exponential(scale=2.0, size=200)


def test_width_edges_and_codes_match_numpy(skewed):
    b = bin_feature(skewed, "width", n_bins=7)
    np.testing.assert_allclose(b.edges, np.linspace(skewed.min(), skewed.max(), 8))
    # bin i = [e_i, e_{i+1}); the maximum belongs to the last bin
    expected = np.clip(np.digitize(skewed, b.edges) - 1, 0, 6)
    np.testing.assert_array_equal(b.codes, expected)
    assert b.n_bins == 7 and b.nan_code == 7
    assert b.table is None and b.iv is None
    # every training value lies inside its bin
    assert np.all(b.edges[b.codes] <= skewed) and np.all(skewed <= b.edges[b.codes + 1])


def test_quantile_edges_match_numpy_and_bins_are_balanced(skewed):
    b = bin_feature(skewed, "quantile", n_bins=4)
    np.testing.assert_allclose(b.edges, np.quantile(skewed, [0, 0.25, 0.5, 0.75, 1.0]))
    np.testing.assert_array_equal(b.codes, np.clip(np.digitize(skewed, b.edges) - 1, 0, 3))
    assert np.bincount(b.codes).tolist() == [50, 50, 50, 50]


def test_quantile_ties_collapse_duplicate_edges():
    values = np.array([0.0] * 8 + [1.0, 2.0])
    b = bin_feature(values, "quantile", n_bins=5)
    np.testing.assert_allclose(b.edges, np.unique(np.quantile(values, np.linspace(0, 1, 6))))
    assert b.n_bins == len(b.edges) - 1 < 5


def test_nan_gets_own_bin_code_n_bins_and_transform_reuses_edges():
    values = np.array([0.0, 1.0, np.nan, 2.0, 3.0, np.nan])
    b = bin_feature(values, "width", n_bins=3)
    np.testing.assert_allclose(b.edges, [0.0, 1.0, 2.0, 3.0])
    assert b.codes.tolist() == [0, 1, 3, 2, 2, 3]
    new = [-10.0, 0.99, 1.0, 2.5, 3.0, 50.0, np.nan]
    ref = np.digitize(new, [1.0, 2.0])  # inner edges; out-of-range values go to the end bins
    ref[np.isnan(new)] = 3
    assert b.transform(new).tolist() == ref.tolist() == [0, 0, 1, 2, 2, 2, 3]
    assert b.transform(pd.Series(new)).tolist() == ref.tolist()


def test_woe_iv_match_hand_computed_table():
    values = [1, 2, 3, 4, 5, 6, 7, 8, np.nan, np.nan]
    target = [1, 0, 0, 0, 1, 1, 1, 0, 0, 1]
    b = bin_feature(values, "width", n_bins=2, target=target)
    # edges linspace(1, 8, 3) = [1, 4.5, 8]: bin0 = {1..4}, bin1 = {5..8}, NaN bin = 2
    # bin0: 1 event, 3 non-events; bin1: 3 events, 1 non-event; NaN: 1 and 1.  Totals: 5 and 5.
    pct_good = np.array([3 / 5, 1 / 5, 1 / 5])
    pct_bad = np.array([1 / 5, 3 / 5, 1 / 5])
    woe = np.log(pct_good / pct_bad)  # [ln 3, -ln 3, 0]
    iv = (pct_good - pct_bad) * woe
    t = b.table
    assert t["bin"].tolist() == [0, 1, 2]
    assert t["count"].tolist() == [4, 4, 2]
    assert t["events"].tolist() == [1, 3, 1]
    assert t["non_events"].tolist() == [3, 1, 1]
    np.testing.assert_allclose(t["event_rate"], [0.25, 0.75, 0.5])
    np.testing.assert_allclose(t["woe"], [math.log(3), -math.log(3), 0.0])
    np.testing.assert_allclose(t["woe"], woe)
    np.testing.assert_allclose(t["iv"], iv)
    assert b.iv == pytest.approx(0.8 * math.log(3))
    np.testing.assert_allclose(t["lower"].iloc[:2], [1.0, 4.5])
    np.testing.assert_allclose(t["upper"].iloc[:2], [4.5, 8.0])
    assert t["lower"].isna().iloc[2]
    np.testing.assert_allclose(b.woe([2.0, 7.0, np.nan]), [math.log(3), -math.log(3), 0.0])


def test_empty_cell_uses_eps_and_stays_finite():
    values = [0, 1, 2, 3, 4, 5]
    target = [1, 1, 0, 0, 0, 0]  # bin1 (values 3..5) has no events
    b = bin_feature(values, "width", n_bins=2, target=target, eps=1e-3)
    t = b.table
    assert t["events"].tolist() == [2, 0, 0]
    # bin0: %good = 1/4, %bad = 2/2; bin1: %good = 3/4, %bad -> eps; NaN bin empty -> eps/eps
    np.testing.assert_allclose(t["woe"], [math.log(0.25), math.log(0.75 / 1e-3), 0.0])
    assert np.isfinite(t["woe"]).all() and np.isfinite(b.iv)
    assert math.isnan(t["event_rate"].iloc[2])  # the empty NaN bin


def test_tree_edges_equal_the_fitted_tree_thresholds():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, size=300)
    p = np.where(x < 3, 0.1, np.where(x < 7, 0.5, 0.9))
    y = (rng.uniform(size=300) < p).astype(int)
    b = bin_feature(x, "tree", n_bins=4, target=y, min_samples_leaf=20)

    tree = DecisionTreeClassifier(max_leaf_nodes=4, min_samples_leaf=20, random_state=0).fit(x[:, None], y)
    split = tree.tree_.feature >= 0
    thresholds = np.sort(tree.tree_.threshold[split])
    np.testing.assert_allclose(b.edges, np.concatenate([[x.min()], thresholds, [x.max()]]))
    assert tree.get_n_leaves() == b.n_bins == 4
    # each bin is exactly one leaf of the tree
    leaves = tree.apply(x[:, None])
    pairs = set(zip(b.codes.tolist(), leaves.tolist()))
    assert len(pairs) == 4 and len({c for c, _ in pairs}) == 4 and len({leaf for _, leaf in pairs}) == 4
    assert b.iv > 0


def test_tree_ignores_nan_rows_and_puts_them_in_nan_bin():
    x = np.array([0.0, 1.0, 2.0, 3.0, np.nan, 10.0, 11.0, 12.0, 13.0])
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    b = bin_feature(x, "tree", n_bins=2, target=y)
    np.testing.assert_allclose(b.edges, [0.0, 6.5, 13.0])  # the midpoint between 3 and 10
    assert b.codes.tolist() == [0, 0, 0, 0, 2, 1, 1, 1, 1]


def test_constant_feature_is_one_bin():
    b = bin_feature([5.0, 5.0, np.nan], "width", n_bins=4)
    assert b.edges.tolist() == [5.0, 5.0] and b.codes.tolist() == [0, 0, 1]


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"method": "kmeans"}, ValueError, "method must be one of"),
        ({"n_bins": 0}, ValueError, "n_bins must be an int >= 1"),
        ({"method": "tree"}, ValueError, "needs target="),
        ({"target": [0, 1, 2, 1]}, ValueError, "target must be binary"),
        ({"target": [0, 1]}, ValueError, "same length"),
        ({"target": [0, 0, 0, 0]}, ValueError, "both classes"),
        ({"eps": 0.0}, ValueError, "eps must be"),
    ],
)
def test_bin_feature_validation(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        bin_feature([1.0, 2.0, 3.0, 4.0], **kwargs)


def test_bin_feature_rejects_bad_values():
    with pytest.raises(ValueError, match="values has no non-NaN"):
        bin_feature([np.nan, np.nan])
    with pytest.raises(ValueError, match="inf"):
        bin_feature([1.0, np.inf])
    with pytest.raises(TypeError, match="values must be"):
        bin_feature(["a", "b"])
    with pytest.raises(ValueError, match="woe\\(\\) needs"):
        bin_feature([1.0, 2.0]).woe([1.0])


@pytest.fixture
def frame():
    rng = np.random.default_rng(2)
    a = rng.normal(size=50)
    return pd.DataFrame({"a": a, "b": 2 * a + rng.normal(scale=0.5, size=50), "c": rng.normal(size=50),
                         "name": ["x"] * 50})


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_heatmap_annotations_match_scipy_numpy(frame, method):
    numeric = frame[["a", "b", "c"]].to_numpy()
    ref = np.corrcoef(numeric, rowvar=False) if method == "pearson" else stats.spearmanr(numeric).statistic
    fig = _draw_heatmap(frame[["a", "b", "c"]].corr(method=method), digits=3, title=None)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == [f"{v:.3f}" for v in ref.ravel()]


def test_correlation_heatmap_writes_png(frame, tmp_path):
    import matplotlib.image as mpimg

    out = correlation_heatmap(frame, tmp_path / "plots" / "corr.png", title="corr")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    with pytest.raises(ValueError, match="at least 2 numeric columns"):
        correlation_heatmap(frame[["a", "name"]], tmp_path / "x.png")
    with pytest.raises(ValueError, match="method must be"):
        correlation_heatmap(frame, tmp_path / "x.png", method="cosine")
    with pytest.raises(TypeError, match="pandas DataFrame"):
        correlation_heatmap(frame.to_numpy(), tmp_path / "x.png")


def test_missing_extra_names_it(monkeypatch):
    import sys

    from trickbag.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"trickbag\[tabular\]"):
        bin_feature([1.0, 2.0], target=[0, 1])
    bin_feature([1.0, 2.0])  # without a target, numpy and scikit-learn suffice
