"""The trainer: loop, events, state, plug-ins, checkpoints, recipe runs."""

from trickbag.train.early_stopping import EarlyStopping
from trickbag.train.events import Event
from trickbag.train.plugin import PLUGINS, Plugin, register_plugin
from trickbag.train.state import State
from trickbag.train.trainer import Trainer

__all__ = ["Trainer", "Plugin", "Event", "State", "EarlyStopping", "PLUGINS", "register_plugin"]
