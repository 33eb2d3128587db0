"""Extras that need an optional dependency: video (av), tabular (pandas), CLIP, interpretability, debugging.

Video frames (av), tabular binning (pandas), zero-shot CLIP (open_clip), interpretability (captum),
debugging helpers; each says which ``pip install 'trickbag[...]'`` it needs.
"""
