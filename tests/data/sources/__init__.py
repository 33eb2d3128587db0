"""Tests of trickbag.data.sources: one file per source."""
