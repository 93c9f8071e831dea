"""``wmrl train`` / ``wmrl eval`` / ``wmrl compare``: WMRL training on a Kaggle track and an embodied track.

One run skeleton, two track wings (the old flat module names stay as deprecated aliases):

* :mod:`wmrl_adapters.train.run`: the shared skeleton (settings, argument checks, the run directory
  and ``train_step`` template, plain-data checkpoints, plots); imports neither wing;
* :mod:`wmrl_adapters.train.kaggle`: ``TrainConfig``, ``Trainer``, the design policy, the execution
  cache, the ``--world-model`` specs, ``wmrl eval`` / ``compare`` / ``record``;
* :mod:`wmrl_adapters.train.embodied`: ``EmbodiedConfig``, ``EmbodiedTrainer``, the embodied policies;
* :mod:`wmrl_adapters.train.cli`: ``wmrl train``, which picks the wing from the arguments.

What each ``--algo`` means is :data:`wmrl_algos.algorithms.ALGORITHMS`.
"""

from __future__ import annotations

from wmrl_adapters.train.run.policy import TrainablePolicy

__all__ = ["TrainablePolicy"]
