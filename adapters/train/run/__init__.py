"""The run skeleton both tracks share: settings, run directory and step template, checkpoints, plots.

Why a package of its own: everything a ``wmrl train`` run does whatever it trains on (declare and
check its settings once, keep a run directory, checkpoint as plain data, resume, plot) lives here, and
nothing here imports either track; the Kaggle wing (:mod:`wmrl_adapters.train.kaggle`) and the
embodied wing (:mod:`wmrl_adapters.train.embodied`) supply only how they collect and score.

* :mod:`~wmrl_adapters.train.run.settings`: :class:`RunSettings`, the settings both configs share, and
  the correction they resolve to;
* :mod:`~wmrl_adapters.train.run.checks`: argument checks (paths, model dirs, values, config files);
* :mod:`~wmrl_adapters.train.run.rundir`: :class:`RunTrainer`, the run directory, checkpoints, the
  ``train_step`` template and the loop;
* :mod:`~wmrl_adapters.train.run.state_io`: checkpoints as plain data (``weights_only`` loads);
* :mod:`~wmrl_adapters.train.run.plots`, :mod:`~wmrl_adapters.train.run.policy`.
"""
