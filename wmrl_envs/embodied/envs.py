"""``LiberoEnv`` and ``RobosuiteEnv``: the embodied track's simulators as Gymnasium environments.

Why these two: LIBERO is where the paper transfers WMRL (LIBERO-Long, with Robometer as the world model
and the simulator's sparse success as the anchor), and robosuite's own tasks (Lift, Stack, PickPlace) are
the short, scriptable tasks on the same simulator (robosuite 1.4, the version LIBERO is built on) that
make a scorer's fidelity measurable in minutes. Both follow one set of conventions:

* observation: a dict with the language ``instruction`` (what a vision-language-action policy conditions
  on), ``proprio`` (end-effector position and quaternion, gripper joints: 9 floats), camera images
  ``agentview_image`` / ``wrist_image`` (uint8, ``image_size`` square, upright) only for the cameras
  asked for (rendering dominates the cost of a step), ``goal_features`` (privileged simulator state for
  the sim-state progress scorer, see :func:`wmrl_envs.embodied.progress.sim_state_progress`) and
  optionally ``object_state`` (object poses);
* action: ``Box(-1, 1, (7,))``, the OSC_POSE delta of the end effector and the gripper command;
  out-of-range values are clipped as the controller would, a wrong shape or a non-finite value raises
  ``gymnasium.error.InvalidAction``;
* reward: sparse success, 1.0 on the step that solves the task (which terminates the episode), else 0.0;
  ``info["success"]``, ``info["instruction"]``, ``info["task_id"]``, ``info["task_name"]`` on every step;
* ``reset(seed=s, options={"task_id": k, "init_index": i})``: LIBERO resets to its suite's fixed initial
  states (50 per task; ``init_index`` picks one, else the seed does), robosuite samples its placement
  from the seed;
* a simulator instability (a NaN state, a MuJoCo error) ends the episode as truncated with
  ``info["sim_error"]`` instead of raising into the trainer; a worker that died is re-started at reset;
* ``render_mode="rgb_array"`` renders the agent-view camera; with no rendering backend the error names
  ``MUJOCO_GL``.
* compute: :attr:`EmbodiedEnv.simulator_cpu_s` adds up the CPU-seconds the worker spent on the env's
  resets and steps, measured in the worker (its process CPU time), not the wall time a caller waits.

The simulator runs in a worker under the embodied stack's interpreter (:mod:`wmrl_envs.embodied.stack`).
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from gymnasium.error import InvalidAction, ResetNeeded

from wmrl_algos.errors import ConfigError
from wmrl_envs.embodied._worker import CAMERAS, IMAGE_KEYS, MAX_OBJECTS, MAX_PREDICATES
from wmrl_envs.embodied.stack import SimulatorError, SimulatorProcess

__all__ = [
    "LIBERO_SUITES",
    "ROBOSUITE_TASKS",
    "Camera",
    "EmbodiedEnv",
    "LiberoEnv",
    "RobosuiteEnv",
    "embodied_env_ids",
    "register_embodied_envs",
]

Camera = Literal["agentview", "robot0_eye_in_hand"]
"""The two cameras of the LIBERO and robosuite scenes (observation keys ``agentview_image`` and
``wrist_image``)."""

LIBERO_SUITES: Mapping[str, tuple[str, int]] = {
    "libero_10": ("wmrl/Libero10-v0", 520),
    "libero_spatial": ("wmrl/LiberoSpatial-v0", 220),
    "libero_object": ("wmrl/LiberoObject-v0", 280),
    "libero_goal": ("wmrl/LiberoGoal-v0", 300),
}
"""Suite name -> (Gymnasium id, step limit). The limits are the ones LIBERO's evaluations use."""

ROBOSUITE_TASKS: Mapping[str, tuple[str, int]] = {
    "Lift": ("wmrl/RobosuiteLift-v0", 200),
    "Stack": ("wmrl/RobosuiteStack-v0", 300),
    "PickPlaceCan": ("wmrl/RobosuitePickPlaceCan-v0", 400),
    "PickPlace": ("wmrl/RobosuitePickPlace-v0", 1000),
}
"""robosuite task -> (Gymnasium id, step limit)."""

PROPRIO_SIZE = 9
_TEXT_SPACE = gym.spaces.Text(max_length=512, charset=string.printable)


class EmbodiedEnv(gym.Env[dict[str, Any], np.ndarray]):
    """What :class:`LiberoEnv` and :class:`RobosuiteEnv` share: spaces, checks, the worker, episode ends.

    ``simulator`` is what the worker makes: its kind (``"libero"`` or ``"robosuite"``) and options.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 20}

    def __init__(
        self,
        simulator: tuple[str, dict[str, Any]],
        *,
        cameras: tuple[Camera, ...] | list[Camera],
        image_size: int,
        object_states: bool,
        object_state_size: int,
        render_mode: str | None,
        python: str | None,
        worker_env: Mapping[str, str] | None,
        frame_stride: int = 1,
    ) -> None:
        cameras = tuple(cameras)
        unknown = [camera for camera in cameras if camera not in CAMERAS]
        if unknown or len(set(cameras)) != len(cameras):
            raise ConfigError(
                f"cameras={cameras!r}; choose distinct cameras among {CAMERAS} (or () for none)"
            )
        if isinstance(image_size, bool) or not isinstance(image_size, int) or not 16 <= image_size <= 1024:
            raise ConfigError(f"image_size={image_size!r}; pass an int in 16..1024 (e.g. 128 or 256)")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode={render_mode!r}; pass 'rgb_array' or None")
        if isinstance(frame_stride, bool) or not isinstance(frame_stride, int) or frame_stride < 1:
            raise ConfigError(
                f"frame_stride={frame_stride!r}; pass a positive int (1: a new frame every step)"
            )
        self.cameras: tuple[Camera, ...] = cameras
        self.frame_stride = frame_stride
        self.image_size = image_size
        self.object_states = bool(object_states)
        self.render_mode = render_mode
        self._python = python
        self._simulator = simulator
        self._worker_env = dict(worker_env or {})
        spaces: dict[str, gym.Space[Any]] = {
            "instruction": _TEXT_SPACE,
            "proprio": gym.spaces.Box(-np.inf, np.inf, (PROPRIO_SIZE,), np.float32),
            "goal_features": gym.spaces.Box(0.0, 1.0, (MAX_PREDICATES, 4), np.float32),
        }
        for camera in cameras:
            spaces[IMAGE_KEYS[CAMERAS.index(camera)]] = gym.spaces.Box(
                0, 255, (image_size, image_size, 3), np.uint8
            )
        if self.object_states:
            spaces["object_state"] = gym.spaces.Box(-np.inf, np.inf, (object_state_size,), np.float32)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (7,), np.float32)
        self._worker: SimulatorProcess | None = None
        self.simulator_cpu_s = 0.0
        """CPU-seconds the simulator workers spent on this env's resets and steps (each worker's own
        ``time.process_time()``; a worker's start-up, and a step it died in, are not counted)."""
        self._description: dict[str, Any] = {}
        self._task: dict[str, Any] | None = None
        self._last_obs: dict[str, Any] | None = None
        self._needs_reset = True
        self._start_worker()

    # Gymnasium API ----------------------------------------------------------------------------------
    @property
    def n_tasks(self) -> int:
        """How many tasks ``options={"task_id": k}`` can select."""
        return int(self._description["n_tasks"])

    @property
    def instructions(self) -> tuple[str, ...]:
        """The language instruction of every task, by task id."""
        return tuple(self._description["instructions"])

    @property
    def simulator_versions(self) -> dict[str, Any]:
        """Versions of Python, MuJoCo, robosuite, LeRobot and torch in the worker, and its ``MUJOCO_GL``."""
        return dict(self._require_worker().versions)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode of task ``options["task_id"]`` (default 0) from a fixed initial state.

        Args:
            seed: seeds the env's generator, which picks the initial state (LIBERO: one of the suite's
                fixed states for the task; robosuite: the object placement).
            options: ``task_id`` (int, default 0) and ``init_index`` (LIBERO only: which fixed initial
                state, overriding the seed's choice).

        Raises:
            ConfigError: an unknown option or an out-of-range ``task_id``/``init_index``.
            SimulatorError: the worker could not reset (a dead worker is restarted once first).
        """
        super().reset(seed=seed)
        options = dict(options or {})
        task_id = options.pop("task_id", 0)
        init_index = options.pop("init_index", None)
        if options:
            raise ConfigError(f"unknown reset options {sorted(options)}; pass task_id and/or init_index")
        _check_index("task_id", task_id, self.n_tasks)
        if init_index is not None:
            n_states = self._description["n_init_states"][task_id]
            if n_states is None:
                raise ConfigError(
                    f"options['init_index']={init_index!r}: {type(self).__name__} has no fixed initial states"
                )
            _check_index("init_index", init_index, n_states)
        draw = int(self.np_random.integers(2**31 - 1))
        if self._worker is None or not self._worker.alive:
            self._start_worker()
        raw_obs, task, cpu_s = self._require_worker().call(
            "reset",
            task_id=int(task_id),
            init_index=None if init_index is None else int(init_index),
            seed=draw,
        )
        self.simulator_cpu_s += cpu_s
        self._task = task
        obs = self._observation(raw_obs)
        self._last_obs = obs
        self._needs_reset = False
        return obs, self._info(success=False)

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        """Apply one 7-d action.

        Returns:
            The Gymnasium 5-tuple. ``terminated`` is True on success (reward 1.0). On a simulator
            instability the episode is truncated with ``info["sim_error"]``, the previous observation
            and reward 0.0.

        Raises:
            gymnasium.error.ResetNeeded: before :meth:`reset` or after the episode ended.
            gymnasium.error.InvalidAction: the action is not 7 finite numbers.
        """
        if self._needs_reset or self._last_obs is None:
            raise ResetNeeded("call reset() before step(), and again after an episode ends")
        try:
            values = np.asarray(action, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidAction(f"action {action!r} is not an array of 7 numbers") from exc
        if values.shape != self.action_space.shape:
            raise InvalidAction(
                f"action shape {values.shape} != {self.action_space.shape} (OSC_POSE delta + gripper)"
            )
        if not np.isfinite(values).all():
            raise InvalidAction(
                f"action {values.tolist()} has a non-finite value; the simulator would diverge"
            )
        try:
            raw_obs, success, error, cpu_s = self._require_worker().call(
                "step", action=np.clip(values, -1.0, 1.0)
            )
        except SimulatorError as exc:  # the worker died: the CPU of the step it did not finish is unknown
            raw_obs, success, error, cpu_s = None, False, f"the simulator worker failed: {exc}", 0.0
        self.simulator_cpu_s += cpu_s
        if error is not None:
            self._needs_reset = True
            return self._last_obs, 0.0, False, True, {**self._info(success=False), "sim_error": error}
        obs = self._observation(raw_obs)
        self._last_obs = obs
        if success:
            self._needs_reset = True
        return obs, float(success), bool(success), False, self._info(success=bool(success))

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """The agent-view camera as an ``(image_size, image_size, 3)`` uint8 array (needs ``rgb_array``)."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; make the env with render_mode='rgb_array'")
            return None
        return self._require_worker().call("render", camera="agentview")

    def close(self) -> None:
        """Stop the simulator worker."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def set_joint_velocities(self, velocities: np.ndarray) -> None:
        """Overwrite the first ``len(velocities)`` joint velocities of the simulation (a debugging hook:
        it is how the tests drive the simulator into a NaN state)."""
        self._require_worker().call("set_joint_velocities", values=[float(v) for v in np.ravel(velocities)])

    # Internals -------------------------------------------------------------------------------------
    def _start_worker(self) -> None:
        if self._worker is not None:
            self._worker.close()
        worker = SimulatorProcess(self._python, env=self._worker_env)
        kind, options = self._simulator
        options = {
            **options,
            "cameras": self.cameras,
            "image_size": self.image_size,
            "object_states": self.object_states,
            "render": self.render_mode is not None,
            "frame_stride": self.frame_stride,
        }
        try:
            self._description = worker.call("make", kind=kind, options=options)
        except BaseException:
            worker.close()
            raise
        self._worker = worker

    def _require_worker(self) -> SimulatorProcess:
        if self._worker is None:
            raise SimulatorError(f"{type(self).__name__} is closed; make a new env")
        return self._worker

    def _observation(self, raw_obs: dict[str, Any]) -> dict[str, Any]:
        assert self._task is not None
        obs = {"instruction": self._task["instruction"], **raw_obs}
        if self.object_states:
            size = self.observation_space["object_state"].shape[0]
            state = np.zeros(size, dtype=np.float32)
            state[: min(size, len(raw_obs["object_state"]))] = raw_obs["object_state"][:size]
            obs["object_state"] = state
        return obs

    def _info(self, *, success: bool) -> dict[str, Any]:
        assert self._task is not None
        return {
            "success": success,
            "instruction": self._task["instruction"],
            "task_id": self._task["task_id"],
            "task_name": self._task["task_name"],
        }


class LiberoEnv(EmbodiedEnv):
    """A LIBERO suite (libero_10, libero_spatial, libero_object, libero_goal) as a Gymnasium env.

    Args:
        suite: the LIBERO suite; its tasks are selected at reset with ``options={"task_id": k}``.
        cameras: which cameras to render into the observation (``()`` for none: 10× cheaper steps).
        image_size: side of the square camera images.
        frame_stride: render the cameras every ``frame_stride``-th step (and on the step that succeeds),
            holding the last frame in between: a camera slower than the controller. Why: software
            rendering is most of a step's cost on a CPU (LIBERO-10 with one 64² agent view: 86 ms a step
            against 11 ms without a camera, 15 ms at a stride of 20; benchmarks/embodied_cost.py), and a
            progress scorer that reads a few frames an episode (as a VLM scorer does) needs no more. A
            step limit that is not a multiple of it ends on a held frame.
        object_states: add ``object_state``: position and quaternion of the task's objects of interest
            (up to 10, zero-padded to 70 floats).
        settle_steps: no-op steps after each reset so objects come to rest (LIBERO's evaluations and
            LeRobot use 10).
        render_mode: ``"rgb_array"`` or ``None``.
        python: the embodied stack's interpreter (default: :func:`~wmrl_envs.embodied.stack.embodied_python`).
        worker_env: extra environment variables for the simulator worker (e.g. ``{"MUJOCO_GL": "osmesa"}``).

    Raises:
        ConfigError: an argument is invalid.
        MissingDependencyError: the embodied stack is not built (``bash scripts/embodied.sh``).
        RenderingUnavailableError: cameras or rendering asked for and MuJoCo cannot render (names
            ``MUJOCO_GL``).

    Example:
        >>> env = LiberoEnv("libero_10", cameras=())  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0, options={"task_id": 0})  # doctest: +SKIP
        >>> info["instruction"]  # doctest: +SKIP
        'put both the alphabet soup and the tomato sauce in the basket'
    """

    def __init__(
        self,
        suite: str = "libero_10",
        *,
        cameras: tuple[Camera, ...] | list[Camera] = CAMERAS,
        image_size: int = 256,
        object_states: bool = False,
        settle_steps: int = 10,
        render_mode: str | None = None,
        python: str | None = None,
        worker_env: Mapping[str, str] | None = None,
        frame_stride: int = 1,
    ) -> None:
        if suite not in LIBERO_SUITES:
            raise ConfigError(f"suite={suite!r}; pass one of {sorted(LIBERO_SUITES)}")
        if isinstance(settle_steps, bool) or not isinstance(settle_steps, int) or settle_steps < 0:
            raise ConfigError(f"settle_steps={settle_steps!r}; pass a non-negative int (LIBERO uses 10)")
        self.suite = suite
        self.settle_steps = settle_steps
        super().__init__(
            ("libero", {"suite": suite, "settle_steps": settle_steps}),
            cameras=cameras,
            image_size=image_size,
            object_states=object_states,
            object_state_size=MAX_OBJECTS * 7,
            render_mode=render_mode,
            python=python,
            worker_env=worker_env,
            frame_stride=frame_stride,
        )


class RobosuiteEnv(EmbodiedEnv):
    """One of robosuite's own tasks (Lift, Stack, PickPlace, PickPlaceCan), Panda arm, as a Gymnasium env.

    robosuite is version 1.4, the one the LIBERO stack brings (robosuite 1.5 changed the controller API).
    A robosuite env holds one task (``task_id`` 0); the seed draws the object placement.

    Args:
        task: the robosuite environment name.
        cameras, image_size, render_mode, python, worker_env, frame_stride: as for :class:`LiberoEnv`.
        object_states: add ``object_state``, robosuite's own ``object-state`` observation.

    Raises:
        ConfigError: an argument is invalid.
        MissingDependencyError: the embodied stack is not built (``bash scripts/embodied.sh``).
        RenderingUnavailableError: cameras or rendering asked for and MuJoCo cannot render.

    Example:
        >>> env = RobosuiteEnv("Lift", cameras=())  # doctest: +SKIP
        >>> obs, info = env.reset(seed=0)  # doctest: +SKIP
        >>> obs["proprio"].shape, info["instruction"]  # doctest: +SKIP
        ((9,), 'lift the red cube')
    """

    OBJECT_STATE_SIZES: ClassVar[dict[str, int]] = {
        "Lift": 10,
        "Stack": 23,
        "PickPlaceCan": 14,
        "PickPlace": 56,
    }

    def __init__(
        self,
        task: str = "Lift",
        *,
        cameras: tuple[Camera, ...] | list[Camera] = CAMERAS,
        image_size: int = 128,
        object_states: bool = True,
        render_mode: str | None = None,
        python: str | None = None,
        worker_env: Mapping[str, str] | None = None,
        frame_stride: int = 1,
    ) -> None:
        if task not in ROBOSUITE_TASKS:
            raise ConfigError(f"task={task!r}; pass one of {sorted(ROBOSUITE_TASKS)}")
        self.task = task
        super().__init__(
            ("robosuite", {"task": task, "horizon": ROBOSUITE_TASKS[task][1] + 1}),
            cameras=cameras,
            image_size=image_size,
            object_states=object_states,
            object_state_size=self.OBJECT_STATE_SIZES[task],
            render_mode=render_mode,
            python=python,
            worker_env=worker_env,
            frame_stride=frame_stride,
        )


def _check_index(name: str, value: Any, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < limit:
        raise ConfigError(f"options[{name!r}]={value!r}; pass an int in 0..{limit - 1}")


def embodied_env_ids() -> tuple[str, ...]:
    """The Gymnasium ids of the embodied envs, LIBERO suites first."""
    return tuple(env_id for env_id, _ in (*LIBERO_SUITES.values(), *ROBOSUITE_TASKS.values()))


def register_embodied_envs() -> tuple[str, ...]:
    """Register every embodied env with Gymnasium (idempotent; imports nothing heavy).

    Returns:
        The registered ids.
    """
    for suite, (env_id, limit) in LIBERO_SUITES.items():
        if env_id not in gym.registry:
            gym.register(
                env_id, "wmrl_envs.embodied.envs:LiberoEnv", max_episode_steps=limit, kwargs={"suite": suite}
            )
    for task, (env_id, limit) in ROBOSUITE_TASKS.items():
        if env_id not in gym.registry:
            gym.register(
                env_id, "wmrl_envs.embodied.envs:RobosuiteEnv", max_episode_steps=limit, kwargs={"task": task}
            )
    return embodied_env_ids()
