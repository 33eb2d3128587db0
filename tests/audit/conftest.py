"""The corpus files and the per-rule fixtures (rules/) are deliberately wrong (or right) training loops read
as text by test_corpus.py and test_rule_fixtures.py;
pytest must not import them (they import torch, timm, accelerate ...)."""

collect_ignore_glob = ["corpus/*", "rules/*"]
