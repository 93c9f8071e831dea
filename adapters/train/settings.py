"""Deprecated alias of :mod:`wmrl_adapters.train.run.settings` (moved; until wmrl 0.3.0)."""

from wmrl_adapters.train._aliases import alias

alias(__name__, "wmrl_adapters.train.run.settings")
