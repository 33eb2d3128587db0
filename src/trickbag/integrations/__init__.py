"""trickbag's tricks in other trainers: :mod:`trickbag.integrations.lightning` (``TricksCallback``) and the
Hugging Face adapter, both built on the framework-neutral :mod:`trickbag.integrations.core`.

Importing this package imports neither framework; each adapter module imports its own.
"""
