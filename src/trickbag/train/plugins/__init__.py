"""The plug-ins trickbag ships for runs: checkpoints (``last.pt``, ``best.pt``, step checkpoints), loggers (CSV,
TensorBoard, W&B), progress, plots, early stopping, signals (Ctrl-C / SIGTERM), and the run folder that puts
them together. They sit beside the loop, in the trainer's layer: they talk to it only through the plug-in
interface (:mod:`trickbag.plugin`) and ``state.services``."""
