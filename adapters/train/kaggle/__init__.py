"""The Kaggle wing of ``wmrl train``: code-writing policies scored by sandboxed executions.

* :mod:`~wmrl_adapters.train.kaggle.config`: :class:`TrainConfig`;
* :mod:`~wmrl_adapters.train.kaggle.trainer`: :class:`Trainer` (the skeleton's hooks for this track);
* :mod:`~wmrl_adapters.train.kaggle.design_policy`: the embedded default policy;
* :mod:`~wmrl_adapters.train.kaggle.execution`: the execution cache and compute meter;
* :mod:`~wmrl_adapters.train.kaggle.world_models`: ``--world-model`` specs and their builder;
* :mod:`~wmrl_adapters.train.kaggle.evaluate` (``wmrl eval``), :mod:`~wmrl_adapters.train.kaggle.compare`
  (``wmrl compare``), :mod:`~wmrl_adapters.train.kaggle.record` (``wmrl record``).
"""
