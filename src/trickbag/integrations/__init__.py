"""Tricks inside other trainers (optional extras, imported on demand): ``trickbag.integrations.hf``."""
