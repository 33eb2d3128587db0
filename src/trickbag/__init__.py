"""trickbag: training tricks for PyTorch as correct, tested, composable parts."""
__version__ = "0.1.0"
