"""WMRL in verl 0.9.1's trainer: ``python -m wmrl_adapters.verl_main`` instead of ``verl.trainer.main_ppo``.

Why an entry point of its own. verl 0.9.1's default trainer (the v1 ``PPOTrainerSync``,
``trainer.use_v1=True``) scores rewards one sample at a time: each agent-loop worker sends every finished
rollout to a reward-loop worker, and nothing in that stream sees a GRPO group. WMRL needs the group
(the anchor plan, the calibration pairs and the weights are per group), so no configuration of the stock
command reaches :class:`~wmrl_adapters.verl.WMRLRewardManager`. verl's v1 trainer does have one
whole-batch reward step: for a colocated reward model it reads the sampled batch from the TransferQueue,
calls ``reward_loop_manager.compute_rm_score`` on it once, and writes ``rm_scores`` back before the
advantage step; it takes that path when ``reward_loop_manager.reward_loop_worker_handles`` is ``None``.
:class:`WMRLRewardStep` is a mixin on verl's own trainer that makes it take that path: after verl's
setup it puts a :class:`WholeBatchReward` in place of the reward-loop manager (no worker handles, so the
agent loop streams no rewards and the trainer calls the whole-batch step), and its reward step adds the
columns WMRL needs (``uid``, ``data_source``, ``reward_model``, ``extra_info``) that verl's step does
not read. Everything else, from rollout to the actor update, is verl's code unchanged; the corrected
advantages then reach verl's ``compute_advantage`` as ``rm_scores`` with ``algorithm.adv_estimator=
wmrl_grpo`` (``wmrl_adapters.verl`` says why the advantages travel as the reward).

The trainer is built inside verl's Ray ``TaskRunner`` actor, from verl's trainer registry; so
:func:`task_runner_class` returns verl's own ``TaskRunnerV1`` whose ``run`` first registers the
``wmrl_grpo`` estimator and swaps the registry's entry for the configured trainer mode for its WMRL
subclass, in that actor's process only (``register_trainer`` refuses to re-register a name, and the mode
name must stay: verl's trainer branches on it).

The WMRL settings come from the same Hydra command line, under a ``wmrl`` key verl does not have (hence
the ``+``)::

    python -m wmrl_adapters.verl_main <your verl overrides> algorithm.adv_estimator=wmrl_grpo \\
        algorithm.use_kl_in_reward=False +wmrl.real=my_rewards:run_tests \\
        +wmrl.world_model=my_rewards:predict +wmrl.correction.anchor_fraction=0.25

Not supported, and refused with the reason: verl's deprecated v0 trainer (``trainer.use_v1=False``: its
agent loop streams rewards whenever no reward model is configured, and turning that off means rebuilding
its workers), the asynchronous v1 modes (their batches mix rollouts of several policy versions), and a
reward model (``reward.reward_model.enable=True``: WMRL takes the reward step).
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from wmrl_adapters.train.run.state_io import load_state, save_state
from wmrl_adapters.verl import ADV_ESTIMATOR_NAME, BatchScorer, WMRLRewardManager, _verl, register

from wmrl_algos.errors import ConfigError
from wmrl_algos.loop import CorrectionConfig

__all__ = [
    "COLUMNS",
    "VerlWMRLConfig",
    "WMRLRewardStep",
    "WholeBatchReward",
    "check_config",
    "compose",
    "load_scorer",
    "main",
    "task_runner_class",
    "trainer_class",
]

COLUMNS = ("uid", "data_source", "reward_model", "extra_info")
"""Per-sample columns the WMRL reward step reads from verl's TransferQueue (verl's own step reads none)."""

SUPPORTED_MODE = "sync"


@dataclass(frozen=True)
class VerlWMRLConfig:
    """The ``wmrl`` section of the verl command line.

    Example:
        >>> config = VerlWMRLConfig.from_mapping(
        ...     {"real": "rewards:run_tests", "world_model": "rewards:predict",
        ...      "correction": {"anchor_fraction": 0.25}}
        ... )
        >>> config.correction.anchor_fraction
        0.25
    """

    real: str = field(
        metadata={
            "help": "The real scorer, 'module:function' or '/path/file.py:function': a verl batch "
            "compute_score f(data_sources, solution_strs, ground_truths, extra_infos) -> list[float | None]. "
            "Called on the anchor groups only."
        }
    )
    world_model: str = field(
        metadata={"help": "The world model, same form and signature; called on every sample."}
    )
    correction: CorrectionConfig = field(
        default_factory=CorrectionConfig,
        metadata={"help": "CorrectionConfig fields (anchor_fraction, weighting, ...): +wmrl.correction.X=."},
    )
    num_examine: int = field(
        default=0, metadata={"help": "Samples of each batch to print with their advantage (0: none)."}
    )

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any] | None) -> VerlWMRLConfig:
        """Build it from the ``wmrl`` section (a dict or an OmegaConf node).

        Raises:
            ConfigError: the section, a scorer or a field is missing or unknown.
        """
        if section is None:
            raise ConfigError(
                "the verl config has no 'wmrl' section; add +wmrl.real=module:function "
                "+wmrl.world_model=module:function to the command line"
            )
        values = dict(section.items())
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(values) - known)
        missing = sorted({"real", "world_model"} - set(values))
        if unknown or missing:
            raise ConfigError(
                f"wmrl section: unknown keys {unknown}, missing keys {missing}; it takes {sorted(known)}"
            )
        correction = dict(values.pop("correction", None) or {})
        correction_fields = {item.name for item in fields(CorrectionConfig)}
        if set(correction) - correction_fields:
            raise ConfigError(
                f"wmrl.correction: unknown keys {sorted(set(correction) - correction_fields)}; "
                f"CorrectionConfig takes {sorted(correction_fields)}"
            )
        return cls(correction=CorrectionConfig(**correction), **values)

    def manager(self, tokenizer: Any) -> WMRLRewardManager:
        """The reward manager these settings describe, for ``tokenizer``."""
        return WMRLRewardManager(
            tokenizer,
            self.num_examine,
            load_scorer(self.real),
            world_model=load_scorer(self.world_model),
            correction=self.correction,
        )


def load_scorer(spec: str) -> BatchScorer:
    """The function ``spec`` names: ``'package.module:function'`` or ``'/path/to/file.py:function'``.

    Raises:
        ConfigError: ``spec`` has no ``:``, the file or module does not import, or the name is not a
            callable in it.
    """
    location, _, name = spec.rpartition(":")
    if not location or not name:
        raise ConfigError(f"scorer {spec!r} is not 'module:function' or '/path/file.py:function'")
    try:
        if location.endswith(".py"):
            path = Path(location).expanduser().resolve()
            module_spec = importlib.util.spec_from_file_location(f"wmrl_verl_scorer_{path.stem}", path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError(f"no Python file at {path}")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(location)
    except (ImportError, OSError) as exc:
        raise ConfigError(f"scorer {spec!r}: {location!r} does not import ({exc})") from exc
    scorer = getattr(module, name, None)
    if not callable(scorer):
        raise ConfigError(f"scorer {spec!r}: {location!r} has no callable {name!r}")
    return scorer


def check_config(config: Any) -> VerlWMRLConfig:
    """Refuse verl settings WMRL cannot run under, each with the fix; return the ``wmrl`` section.

    Raises:
        ConfigError: the estimator is not ``wmrl_grpo``, a KL penalty goes into the reward, the v0
            trainer or an asynchronous v1 mode is selected, or a reward model is enabled.
    """
    problems = []
    if config.algorithm.adv_estimator != ADV_ESTIMATOR_NAME:
        problems.append(
            f"algorithm.adv_estimator={config.algorithm.adv_estimator}: set it to {ADV_ESTIMATOR_NAME}"
        )
    if config.algorithm.use_kl_in_reward:
        problems.append(
            "algorithm.use_kl_in_reward=True shifts the corrected advantages: set it False "
            "(use actor_rollout_ref.actor.use_kl_loss=True for the KL term)"
        )
    if not config.trainer.use_v1:
        problems.append(
            "trainer.use_v1=False (the deprecated v0 trainer) is not supported: set trainer.use_v1=True"
        )
    elif config.trainer.v1.trainer_mode != SUPPORTED_MODE:
        problems.append(
            f"trainer.v1.trainer_mode={config.trainer.v1.trainer_mode}: WMRL's groups must come from one "
            f"policy version; use trainer.v1.trainer_mode={SUPPORTED_MODE}"
        )
    if config.reward.reward_model.enable:
        problems.append("reward.reward_model.enable=True: WMRL takes the reward step; set it False")
    if problems:
        raise ConfigError("verl config not usable with WMRL: " + "; ".join(problems))
    return VerlWMRLConfig.from_mapping(config.get("wmrl"))


class WholeBatchReward:
    """Stands in for verl's ``RewardLoopManager``: no streaming workers, one WMRL call per batch.

    ``reward_loop_worker_handles`` is ``None``, which is what makes verl's agent loop stream no rewards
    and verl's trainer call :meth:`compute_rm_score` on the whole sampled batch.

    Example:
        >>> reward = WholeBatchReward(manager=None)
        >>> reward.reward_loop_worker_handles is None
        True
    """

    reward_loop_worker_handles = None

    def __init__(self, manager: WMRLRewardManager | None) -> None:
        self.manager = manager
        self.columns: dict[str, np.ndarray] = {}
        self.validate = False
        self.calls = 0

    def compute_rm_score(self, data: Any) -> Any:
        """The manager's ``compute_rm_score`` on ``data`` plus the columns the trainer staged."""
        if self.manager is None:
            raise ConfigError("WholeBatchReward has no manager; attach one before the first reward step")
        data.non_tensor_batch.update(self.columns)
        data.meta_info["validate"] = self.validate
        self.calls += 1
        return self.manager.compute_rm_score(data)


class WMRLRewardStep:
    """Mixin on a verl v1 ``PPOTrainer`` class: WMRL's reward manager takes the whole-batch reward step.

    Use :func:`trainer_class` to get ``WMRL<verl trainer>``; :meth:`attach_wmrl` is the part of the
    setup that needs no GPU (it is called after verl's ``_setup``, which needs the workers).

    Example:
        >>> [name for name in vars(WMRLRewardStep) if name.startswith("_") and not name.startswith("__")]
        ['_setup', '_save_checkpoint', '_compute_reward_colocate']
    """

    wmrl_reward: WholeBatchReward
    global_steps: int

    def _setup(self) -> None:
        super()._setup()  # type: ignore[misc]
        self.attach_wmrl()

    def attach_wmrl(self) -> None:
        """Register ``wmrl_grpo`` here (the advantage step runs in this process), build the manager from
        ``config.wmrl``, restore its state when verl resumed a checkpoint, and put it in place of verl's
        reward-loop manager."""
        register()
        settings = check_config(self.config)  # type: ignore[attr-defined]
        manager = settings.manager(self.tokenizer)  # type: ignore[attr-defined]
        if getattr(self, "global_steps", 0) > 0:
            self.restore_wmrl_state(manager)
        self.wmrl_reward = WholeBatchReward(manager)
        self.reward_loop_manager = self.wmrl_reward

    def restore_wmrl_state(self, manager: WMRLRewardManager) -> None:
        """Load the state verl's resumed checkpoint holds into ``manager``, as plain data (nothing in the
        file can run code); warn and start afresh when the checkpoint has none.

        Raises:
            CheckpointError: the state file is not plain data (written by an older wmrl, or tampered with).
        """
        path = self.wmrl_state_path(resuming=True)
        if not path.is_file():
            warnings.warn(
                f"verl resumed step {self.global_steps} but {path} does not exist (a checkpoint of a run "
                "without WMRL?): the calibration and weights start again from nothing",
                stacklevel=3,
            )
            return
        older = f"delete {path} to resume verl's checkpoint with the calibration starting again from nothing"
        manager.load_state_dict(load_state(path, if_older=older))

    def wmrl_state_path(self, resuming: bool = False) -> Path:
        """``wmrl.pt`` in the checkpoint folder of this step: where verl saves, or the one it resumed."""
        trainer = self.config.trainer  # type: ignore[attr-defined]
        if resuming and trainer.resume_mode == "resume_path":
            return Path(trainer.resume_from_path) / "wmrl.pt"
        return Path(trainer.default_local_dir) / f"global_step_{self.global_steps}" / "wmrl.pt"

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()  # type: ignore[misc]
        self.save_wmrl_state()

    def save_wmrl_state(self) -> None:
        """Save the correction loop's state next to verl's checkpoint of this step."""
        path = self.wmrl_state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        save_state(path, self.wmrl_reward.manager.state_dict())  # type: ignore[union-attr]

    def _compute_reward_colocate(self, batch: Any, metrics: dict[str, Any] | None = None) -> Any:
        """Stage the group columns, then verl's own whole-batch reward step (which calls the manager)."""
        tq = _verl("transfer_queue")
        stored = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=list(COLUMNS)
        )
        self.wmrl_reward.columns = {name: _object_array(stored[name]) for name in COLUMNS}
        self.wmrl_reward.validate = batch.partition_id != "train"
        batch = super()._compute_reward_colocate(batch, metrics=metrics)  # type: ignore[misc]
        result = self.wmrl_reward.manager.last_result  # type: ignore[union-attr]
        if metrics is not None and result is not None and not self.wmrl_reward.validate:
            metrics.update(result.metrics)
        return batch


def _object_array(values: Any) -> np.ndarray:
    """A TransferQueue non-tensor column as the object array ``DataProto.non_tensor_batch`` holds."""
    items = list(values)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def trainer_class(config: Any) -> type:
    """``WMRL<trainer>``: :class:`WMRLRewardStep` on the verl trainer ``config`` selects (checked first)."""
    check_config(config)
    base = _verl("verl.trainer.ppo.v1").get_trainer_cls(config.trainer.v1.trainer_mode)
    if issubclass(base, WMRLRewardStep):
        return base
    return type(f"WMRL{base.__name__}", (WMRLRewardStep, base), {"__module__": __name__})


def _install(config: Any) -> None:
    """In the process that builds the trainer: the WMRL trainer under verl's mode name."""
    registry = _verl("verl.trainer.ppo.v1.trainer_base").TRAINER_REGISTRY
    registry[config.trainer.v1.trainer_mode] = trainer_class(config)


def task_runner_class() -> Any:
    """verl's ``TaskRunnerV1`` (a Ray actor class) whose ``run`` installs WMRL first."""
    ray = _verl("ray")
    base = _verl("verl.trainer.main_ppo").TaskRunnerV1.__ray_actor_class__

    class WMRLTaskRunner(base):  # type: ignore[misc, valid-type]
        def run(self, config: Any) -> None:
            _install(config)
            super().run(config)

    return ray.remote(WMRLTaskRunner)


def verl_config_dir() -> Path:
    """verl's own Hydra config folder (``verl/trainer/config``), the one ``main_ppo`` reads."""
    return Path(_verl("verl.trainer.main_ppo").__file__).parent / "config"


def compose(overrides: list[str]) -> Any:
    """The config ``python -m wmrl_adapters.verl_main <overrides>`` runs with (checked); runs nothing."""
    hydra = _verl("hydra")
    with hydra.initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        config = hydra.compose(config_name="ppo_trainer", overrides=overrides)
    check_config(config)
    return config


def _run(config: Any) -> None:
    """What ``main_ppo.main`` does, with the WMRL task runner."""
    main_ppo = _verl("verl.trainer.main_ppo")
    check_config(config)
    main_ppo.auto_set_device(config)
    main_ppo.validate_config(
        config=config,
        use_reference_policy=main_ppo.need_reference_policy(config),
        use_critic=main_ppo.need_critic(config),
    )
    main_ppo.run_ppo(config, task_runner_class=task_runner_class())


def main() -> None:
    """``python -m wmrl_adapters.verl_main``: verl's ``main_ppo`` command line, WMRL in the reward step."""
    hydra = _verl("hydra")
    hydra.main(config_path=str(verl_config_dir()), config_name="ppo_trainer", version_base=None)(_run)()


if __name__ == "__main__":
    main()
