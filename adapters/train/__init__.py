"""``wmrl train`` / ``wmrl eval`` / ``wmrl compare``: WMRL training on a Kaggle track and an embodied track.

One run skeleton, two track wings:

* shared: :mod:`~wmrl_adapters.train.settings` (the settings both tracks share, the correction they
  resolve to), :mod:`~wmrl_adapters.train.rundir` (:class:`RunTrainer`: the run directory, checkpoints,
  the step template and loop), :mod:`~wmrl_adapters.train.state_io` (checkpoints as plain data),
  :mod:`~wmrl_adapters.train.plots`, :mod:`~wmrl_adapters.train.cli`;
* Kaggle: :mod:`~wmrl_adapters.train.trainer` (``Trainer``), :mod:`~wmrl_adapters.train.design_policy`,
  :mod:`~wmrl_adapters.train.execution`, :mod:`~wmrl_adapters.train.evaluate`,
  :mod:`~wmrl_adapters.train.world_models`, :mod:`~wmrl_adapters.train.compare`;
* embodied: :mod:`~wmrl_adapters.train.embodied` (``EmbodiedTrainer``),
  :mod:`~wmrl_adapters.train.embodied_policy`.

Both configs live in :mod:`~wmrl_adapters.train.config`; what each ``--algo`` means is
:data:`wmrl_algos.algorithms.ALGORITHMS`.
"""

from __future__ import annotations

from wmrl_adapters.train.policy import TrainablePolicy

__all__ = ["TrainablePolicy"]
