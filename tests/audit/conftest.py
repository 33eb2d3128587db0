"""The corpus files are deliberately wrong (or right) training loops read as text by test_corpus.py;
pytest must not import them (they import torch, timm, accelerate ...)."""

collect_ignore_glob = ["corpus/*"]
