"""Reconstructed real training-loop mistakes (read as text by test_real_mistakes.py; see conftest.py)."""
