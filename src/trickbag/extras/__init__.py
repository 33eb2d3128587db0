"""Extras with optional dependencies: video frames (av), tabular binning (pandas), zero-shot CLIP (open_clip),
interpretability (captum), debugging helpers; each says which ``pip install 'trickbag[...]'`` it needs."""
