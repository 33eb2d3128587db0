"""The NN_*.py files (and their _*.py helper modules) are reconstructed training-loop mistakes read as text by
test_real_mistakes.py; pytest must not import them (they import ignite, accelerate ...), nor their fixed versions
in fixed/ (some are scripts that run at import)."""

collect_ignore_glob = ["[0-9][0-9]*_*.py", "_*.py", "fixed/[0-9][0-9]*_*.py"]
