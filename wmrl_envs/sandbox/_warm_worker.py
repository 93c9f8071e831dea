"""The program a warm worker runs: preload, hide what it loaded, wait for ``go``, run the solution cold-style.

Why a program of its own: a warm worker must grade every solution exactly as a fresh
``python -s -B solution.py`` would (a difference is a reward a policy can learn to exploit), so the
steps CPython takes around a script are rebuilt here, in CPython's order, and each one is a place
where a solution could otherwise tell warm from cold:

* **A fresh ``sys.modules``.** Everything imported after start-up (the preload, this program's own
  imports) is taken out of ``sys.modules`` before the solution runs, with the warnings filters,
  environment variables and ``atexit`` handlers those imports installed. A meta-path finder, in the
  place and with the name of ``BuiltinImporter``, hands a hidden module back unchanged when the
  solution imports it, together with every module its import loaded (recorded while preloading, each
  preload item with everything before it hidden, so that shared dependencies are recorded for each
  item) and the side effects of its preload item.
* **The script's run** (``_PyRun_SimpleFileObject``): ``__main__`` as a cold interpreter has it
  before the script, the standard streams flushed quietly after it (``flush_io``), an uncaught
  exception printed by ``sys.excepthook`` (with CPython's report when the hook itself fails), ``sys.last_*``
  set, ``SystemExit`` turned into a status the way ``_Py_HandleSystemExit`` does, ``__file__`` removed.
* **The interpreter's teardown** (``Py_FinalizeEx``, ``Py_RunMain``): non-daemon threads joined,
  ``atexit`` handlers, the standard streams flushed as ``flush_std_files`` does (a ``None`` or closed
  stream is skipped; a failed flush is reported as unraisable and makes the exit status 120), a
  collection, the streams restored and ``__main__`` cleared, and an unhandled ``KeyboardInterrupt``
  re-raised as ``SIGINT``. The rest of the teardown (freeing the preloaded modules, seconds of work a
  solution cannot observe) is skipped with ``os._exit``.

Source files that Python decodes differently from a file than from bytes (a NUL byte, a coding
declaration) never reach a warm worker: :class:`~wmrl_envs.sandbox.warm.WarmSandbox` runs them cold.

Run inside the sandbox as ``python -s -B -c <this source> <modules,comma-separated> <cwd> <ready file>``
(the package itself is not mounted there); the host never imports it. It has no
``from __future__ import annotations``: that statement imports ``__future__``, a module a cold
interpreter need not have, before the start-up modules are recorded.
"""

import sys

STARTUP_MODULES = frozenset(sys.modules)
_STARTUP_PATH_FINDERS = frozenset(sys.path_importer_cache)
_ModuleSpec = type(sys.__spec__)
_BuiltinImporter = sys.__spec__.loader
_ModuleType = type(sys)
_CLEARED_AT_EXIT = ("path", "argv", "ps1", "ps2", "last_type", "last_value", "last_traceback", "path_hooks",
                    "path_importer_cache", "meta_path", "__interactivehook__")

__all__ = ["STARTUP_MODULES"]


class _HandBack:
    """A loader that returns a hidden module to the import system as it was (its own ``__spec__``)."""

    def __init__(self, module: object) -> None:
        self.module = module
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec: object) -> object:
        return self.module

    def exec_module(self, module: object) -> None:
        module.__spec__ = self.spec  # the import system set ours


class _Hidden:
    """The modules taken out of ``sys.modules``, what each one's import loaded, and its side effects."""

    def __init__(self) -> None:
        self.modules: dict[str, object] = {}
        self.closures: dict[str, tuple[str, ...]] = {}
        self.effects: dict[str, list[tuple[str, object]]] = {}
        self.recording = True
        self._started: dict[str, int] = {}
        self._appeared: dict[str, int] = {}
        self._clock = 0

    def find_spec(self, name: str, path: object = None, target: object = None) -> object:
        if self.recording:
            self._note_appearances()
            self._started[name] = self._clock
        module = self.modules.pop(name, None)
        if module is None:
            return _BuiltinImporter.find_spec(name, path, target)
        for dependency in self.closures.get(name, ()):
            hidden = self.modules.pop(dependency, None)
            if hidden is not None and dependency not in sys.modules:
                sys.modules[dependency] = hidden
        effects = self.effects.get(name, ()) if self.recording else self.effects.pop(name, ())
        for kind, effect in effects:
            _apply_effect(kind, effect)
        return _ModuleSpec(name, _HandBack(module))

    def _note_appearances(self) -> None:
        for name in sys.modules:
            self._appeared.setdefault(name, self._clock)
        self._clock += 1

    def close_item(self) -> None:
        """Record what each module loaded since the last item, then hide everything loaded after start-up."""
        self._note_appearances()
        order = {name: index for index, name in enumerate(sys.modules)}
        for name, start in self._started.items():
            if name in order and name not in self.closures and name not in STARTUP_MODULES:
                self.closures[name] = tuple(
                    other for other in sys.modules
                    if other != name and self._appeared.get(other, -1) >= start and order[other] < order[name]
                )
        self._started.clear()
        for name in [name for name, module in sys.modules.items()
                     if name not in STARTUP_MODULES and isinstance(module, _ModuleType)]:
            self.modules[name] = sys.modules.pop(name)
            self._appeared.pop(name, None)


def _apply_effect(kind: str, effect: object) -> None:
    """Replay one recorded side effect of an import, unless it already happened (as it would only once)."""
    if kind != "environ":
        origin = id(effect[1] if kind == "filter" else effect[0])
        if origin in _APPLIED:
            return
        _APPLIED.add(origin)
    if kind == "filter":
        append, item = effect
        if not append:
            with contextlib.suppress(ValueError):
                warnings.filters.remove(item)
            warnings.filters.insert(0, item)
        elif item not in warnings.filters:
            warnings.filters.append(item)
        warnings._filters_mutated()
    elif kind == "environ":
        os.environ.update(effect)
    else:
        function, args, kwargs = effect
        atexit.register(function, *args, **kwargs)


class _RecordingFilters(list):
    """``warnings.filters`` while preloading: logs each filter added, in order, to replay it later."""

    def __init__(self, filters: list[object], log: list[tuple[str, object]]) -> None:
        super().__init__(filters)
        self.log = log

    def insert(self, index: int, item: object) -> None:
        self.log.append(("filter", (False, item)))
        _APPLIED.add(id(item))
        super().insert(index, item)

    def append(self, item: object) -> None:
        self.log.append(("filter", (True, item)))
        _APPLIED.add(id(item))
        super().append(item)


_HIDDEN = _Hidden()
_APPLIED: set[int] = set()
"""The recorded side effects (by the identity of their filter or function) that have happened."""
_Finder = type("BuiltinImporter", (_BuiltinImporter,), {
    "__module__": _BuiltinImporter.__module__,
    "__qualname__": _BuiltinImporter.__qualname__,
    "__doc__": _BuiltinImporter.__doc__,
    "find_spec": classmethod(lambda cls, name, path=None, target=None: _HIDDEN.find_spec(name, path, target)),
})
if _BuiltinImporter in sys.meta_path:
    sys.meta_path[sys.meta_path.index(_BuiltinImporter)] = _Finder
else:
    sys.meta_path.insert(0, _Finder)

import atexit  # noqa: E402  (after STARTUP_MODULES: these are hidden from the solution like the preload)
import contextlib  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import warnings  # noqa: E402
import weakref  # noqa: E402


def _preload(names: list[str]) -> None:
    """Import each module with everything before it hidden, recording what it loaded and changed.

    The path finders its imports cached are dropped too: a cold interpreter has made none yet.
    """
    register, original_filters = atexit.register, warnings.filters
    log: list[tuple[str, object]] = []

    def recording_register(function: object, *args: object, **kwargs: object) -> object:
        log.append(("atexit", (function, args, kwargs)))
        _APPLIED.add(id(function))
        return register(function, *args, **kwargs)

    atexit.register = recording_register
    warnings.filters = _RecordingFilters(original_filters, log)
    try:
        _HIDDEN.close_item()
        for name in names:
            environ = dict(os.environ)
            log.clear()
            _APPLIED.clear()
            with contextlib.suppress(Exception):
                __import__(name)
            changed = {key: value for key, value in os.environ.items() if environ.get(key) != value}
            effects = [*log, ("environ", changed)] if changed else list(log)
            for kind, effect in log:
                if kind == "atexit":
                    atexit.unregister(effect[0])
            warnings.filters[:] = original_filters
            warnings._filters_mutated()
            for key in changed:
                if key in environ:
                    os.environ[key] = environ[key]
                else:
                    del os.environ[key]
            if effects and name in sys.modules:
                _HIDDEN.effects[name] = effects
            _HIDDEN.close_item()
    finally:
        atexit.register, warnings.filters = register, original_filters
        warnings._filters_mutated()
        _HIDDEN.recording = False
        _APPLIED.clear()
    for entry in set(sys.path_importer_cache) - _STARTUP_PATH_FINDERS:
        del sys.path_importer_cache[entry]


def _unraisable_args_type() -> type:
    captured: list[object] = []
    hook = sys.unraisablehook
    sys.unraisablehook = captured.append

    class _Raises:
        def __del__(self) -> None:
            raise RuntimeError

    try:
        _Raises()
    finally:
        sys.unraisablehook = hook
    return type(captured[0])


_UnraisableHookArgs = _unraisable_args_type()


def _without_our_frame(error: BaseException) -> BaseException:
    tb = error.__traceback__
    error.__traceback__ = tb.tb_next if tb is not None else None
    return error


def _write_unraisable(error: BaseException, culprit: object) -> None:
    """``PyErr_WriteUnraisable(culprit)``: the solution's ``sys.unraisablehook``, else the default."""
    hook = vars(sys).get("unraisablehook")
    try:
        (hook or sys.__unraisablehook__)(
            _UnraisableHookArgs((type(error), error, error.__traceback__, None, culprit)))
    except BaseException as hook_error:
        _without_our_frame(hook_error)
        sys.__unraisablehook__(_UnraisableHookArgs((type(hook_error), hook_error, hook_error.__traceback__,
                                                    "Exception ignored in sys.unraisablehook", hook)))


def _write_stderr(text: str) -> None:
    """``PySys_WriteStderr``: to ``sys.stderr``, or to file descriptor 2 when that fails."""
    try:
        vars(sys)["stderr"].write(text)
    except BaseException:
        os.write(2, text.encode("utf-8", "backslashreplace"))


def _flush_io() -> None:
    """``flush_io``: flush ``sys.stderr`` and ``sys.stdout`` after the script, errors ignored."""
    for name in ("stderr", "stdout"):
        with contextlib.suppress(BaseException):
            vars(sys)[name].flush()


def _is_closed(stream: object) -> bool:
    try:
        return bool(stream.closed)
    except BaseException:
        return False


def _flush_std_files() -> bool:
    """``flush_std_files``: flush the streams that are set and open; False when a flush failed."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = vars(sys).get(name)
        if stream is None or _is_closed(stream):
            continue
        try:
            stream.flush()
        except BaseException as error:
            flushed = False
            if name == "stdout":
                _write_unraisable(_without_our_frame(error), stream)
    return flushed


def _exit_status(system_exit: SystemExit) -> int:
    """``_Py_HandleSystemExit``: the status of a ``SystemExit``, its message written as CPython writes it."""
    try:
        code = system_exit.code
    except BaseException:
        code = system_exit
    if code is None:
        return 0
    if isinstance(code, int):
        return code if -(2**63) <= code < 2**63 else -1
    stderr = vars(sys).get("stderr")
    try:
        if stderr is not None:
            stderr.write(str(code))
        else:
            os.write(2, str(code).encode("utf-8", "backslashreplace"))
    except BaseException:
        pass
    _write_stderr("\n")
    return 1


def _print_exception(error: BaseException) -> int | None:
    """``PyErr_Print`` of an uncaught exception; the exit status when the hook itself raised SystemExit."""
    sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__
    hook = vars(sys).get("excepthook")
    if hook is None and "excepthook" not in vars(sys):
        _write_stderr("sys.excepthook is missing\n")
        sys.__excepthook__(type(error), error, error.__traceback__)
        return None
    try:
        hook(type(error), error, error.__traceback__)
    except SystemExit as system_exit:
        return _exit_status(system_exit)
    except BaseException as hook_error:
        _without_our_frame(hook_error)
        _write_stderr("Error in sys.excepthook:\n")
        sys.__excepthook__(type(hook_error), hook_error, hook_error.__traceback__)
        _write_stderr("\nOriginal exception was:\n")
        sys.__excepthook__(type(error), error, error.__traceback__)
    return None


def _clear_module_dict(namespace: dict[str, object]) -> None:
    """``_PyModule_ClearDict``: set ``_private`` names to None, then every name but ``__builtins__``."""
    for private in (True, False):
        for name, value in list(namespace.items()):
            if value is not None and isinstance(name, str) and name != "__builtins__" and (
                    not private or (name[:1] == "_" and name[1:2] != "_")):
                namespace[name] = None


def _finalize(main: object, status: int, interrupted: bool) -> None:
    """The observable steps of ``Py_FinalizeEx`` and ``Py_RunMain``, then ``os._exit``.

    Args:
        main: a weak reference to the solution's ``__main__`` module (the only reference left here,
            so that dropping it from ``sys.modules`` frees it as ``finalize_modules`` does).
        status: the exit status so far.
        interrupted: an unhandled ``KeyboardInterrupt`` ended the script.
    """
    threads = sys.modules.get("threading")
    if threads is not None:
        try:
            threads._shutdown()
        except BaseException as error:
            _write_unraisable(_without_our_frame(error), threads)
    atexit._run_exitfuncs()
    flushed = _flush_std_files()
    if gc.isenabled():
        gc.collect()
    for name in _CLEARED_AT_EXIT:
        setattr(sys, name, None)
    for name in ("stdin", "stdout", "stderr"):
        setattr(sys, name, vars(sys).get(f"__{name}__"))
    sys.modules.pop("__main__", None)
    gc.collect()
    if main() is not None:
        _clear_module_dict(vars(main()))
        gc.collect()
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(BaseException):
            stream.flush()
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit((status if flushed else 120) & 0xFF)


def _execute(namespace: dict[str, object], path: str) -> tuple[int, bool]:
    """Run ``path`` in ``namespace`` as ``_PyRun_SimpleFileObject`` does.

    Returns:
        The exit status and whether an unhandled ``KeyboardInterrupt`` ended it.
    """
    with open(path, "rb") as handle:
        source = handle.read()
    error: BaseException | None = None
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except BaseException as compile_error:
        error = compile_error.with_traceback(None)
    else:
        try:
            exec(code, namespace)
        except BaseException as run_error:
            error = _without_our_frame(run_error)
    _flush_io()
    if isinstance(error, SystemExit):
        return _exit_status(error), False
    status = 0
    if error is not None:
        hook_exit = _print_exception(error)
        if hook_exit is not None:
            return hook_exit, False
        status = 1
    namespace.pop("__file__", None)
    namespace.pop("__cached__", None)
    return status, isinstance(error, KeyboardInterrupt)


def _run(cwd: str) -> None:
    """Run ``solution.py`` as the ``__main__`` module of a fresh interpreter, then tear down."""
    path = cwd + "/solution.py"
    sys.argv = ["solution.py"]
    sys.orig_argv = [sys.orig_argv[0], "-s", "-B", "solution.py"]
    sys.path[0] = cwd
    sys.path_importer_cache[path] = None  # the interpreter asked whether the script is a zip archive
    main = _ModuleType("__main__")
    vars(main).update(__loader__=sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path),
                      __annotations__={}, __builtins__=sys.modules["builtins"], __file__=path,
                      __cached__=None)
    sys.modules["__main__"] = main
    status, interrupted = _execute(vars(main), path)
    reference = weakref.ref(main)
    del main
    _finalize(reference, status, interrupted)


def main() -> None:
    """Preload, say so, wait for ``go`` on stdin, run the solution; never returns after ``go``."""
    modules, cwd, ready = sys.argv[1:4]
    sys.argv = sys.argv[:1]
    _preload([name for name in modules.split(",") if name])
    gc.freeze()
    open(ready, "w").close()
    if sys.stdin.buffer.read(2) != b"go":
        os._exit(0)
    vars(sys.modules["__main__"]).clear()
    _run(cwd)
