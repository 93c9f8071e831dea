"""Training code agents on expensive environments with WMRL: the trainer, the CPU design-space agent,
evaluation and the method comparison (``wmrl train``, ``wmrl eval``, ``wmrl compare``)."""

from __future__ import annotations

from wmrl_adapters.train.policy import TrainablePolicy

__all__ = ["TrainablePolicy"]
