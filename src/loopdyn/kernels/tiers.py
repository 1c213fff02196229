"""Which tier runs a kernel: *compiled* (numba, cached on disk) or *eager* (its Python).

``LOOPDYN_TIER`` (environment, read at import) chooses:

``auto`` (default)
    a kernel whose machine code is in numba's disk cache for this package source (or
    already compiled in this process) runs compiled; one that is not runs eagerly
    (``kernels/eager.py``: the same source, interpreted; identical to rounding), and a
    background process compiles it into the cache for the next run
    (``python -m loopdyn.kernels.background``, at low priority, one at a time per cache);
    an eager entry switches to its compiled code within a second of that build
    finishing.  So the first run on a new machine answers in seconds and the second
    runs compiled.
``compiled``
    every kernel is compiled (or loaded) at its first call, nothing runs eagerly: the
    test-suite, benchmarks and production loops that should not wait on a build.
``eager``
    nothing is compiled in this process (and no background build is started).

``LOOPDYN_BACKGROUND=0`` turns the background builds off (``auto`` then runs eagerly
what is not cached, and compiles nothing).  ``loopdyn compile`` builds the cache in the
foreground.  The tier that ran is recorded (``used()``); the command line prints it.
"""

import atexit
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from loopdyn.kernels import numba_internals
from loopdyn.kernels.eager import twin

POLICIES = ("auto", "compiled", "eager")
_policy = os.environ.get("LOOPDYN_TIER", "auto").strip().lower() or "auto"
if _policy not in POLICIES:  # pragma: no cover - a typo in the environment
    raise ValueError(f"LOOPDYN_TIER={_policy!r}: use one of {', '.join(POLICIES)}")
_background = os.environ.get("LOOPDYN_BACKGROUND", "1").strip() not in ("0", "false", "no")

# what the background build compiles besides what was asked for: the kernels of the
# README's first command (build, forward dynamics, the simulation loop)
WORKLOAD = "loopdyn.sim.simulate:warm_up"  # four_bar built, its dynamics, a short simulation
CORE = (
    "loopdyn.kinematics.frames:FK",
    "loopdyn.kinematics.closures:CONSTRAINTS",
    "loopdyn.methods.augmented:ENTRY",
    WORKLOAD,
)
# the seconds between two looks at the disk cache from an eager entry
RECHECK_S = 1.0

_used = set()  # tiers that ran in this process
_requested = []  # names asked for a background build, in order
_spawned = set()  # names a background build was started for


def policy():
    """The tier policy of this process: ``auto``, ``compiled`` or ``eager``."""
    return _policy


def set_policy(p):
    """Change the policy (tests, ``loopdyn compile``); returns the previous one."""
    global _policy
    if p not in POLICIES:
        raise ValueError(f"tier policy {p!r}: use one of {', '.join(POLICIES)}")
    old, _policy = _policy, p
    _chosen.clear()
    return old


def note(tier):
    _used.add(tier)


def used():
    """The tiers that ran kernels in this process so far (a sorted tuple)."""
    return tuple(sorted(_used))


def dispatcher_cached(dispatcher):
    """True if ``dispatcher`` has machine code in this process or in numba's disk cache
    for the current package source (any signature)."""
    if dispatcher.overloads:
        return True
    try:
        return bool(dispatcher._cache._cache_file._load_index())
    except (AttributeError, OSError, EOFError, ValueError):  # pragma: no cover
        return False


def wants_eager(cached):
    """Whether a kernel whose compiled code is (``cached``) or is not on disk runs
    eagerly under the current policy."""
    return _policy == "eager" or (_policy == "auto" and not cached)


_chosen = {}  # dispatcher -> (what runs it, time of the choice)


def kernel(dispatcher):
    """``dispatcher`` or its eager twin (errors as numpy's: ``np.errstate`` ignoring),
    for a kernel Python calls directly (not an ``Entry``); the choice is remembered, an
    eager one looked at again after ``RECHECK_S``."""
    hit = _chosen.get(dispatcher)
    if _policy == "eager":
        fn = hit[0] if hit is not None and hit[0] is not dispatcher else _errstate_twin(dispatcher)
        _chosen[dispatcher] = (fn, time.perf_counter())
        note("eager")
        return fn
    if hit is not None and hit[0] is dispatcher:
        return dispatcher  # (noted when chosen)
    if hit is not None and time.perf_counter() - hit[1] < RECHECK_S:
        return hit[0]
    if _policy == "compiled" or (_policy == "auto" and dispatcher_cached(dispatcher)):
        fn = dispatcher
        note("compiled")
    else:
        fn = hit[0] if hit is not None else _errstate_twin(dispatcher)
        note("eager")
        if _background and _policy == "auto":
            request(WORKLOAD)
    _chosen[dispatcher] = (fn, time.perf_counter())
    return fn


def _errstate_twin(dispatcher):
    py = twin(dispatcher)

    def run(*args):
        with np.errstate(all="ignore"):
            return py(*args)

    return run


def request(name):
    """Ask for a background build of ``name`` (``module:attribute`` of an ``Entry`` or a
    dispatcher): the first request of a process starts one with ``CORE``; later names
    are built by another started at exit.  After ``defer_background()`` (the command
    line) nothing starts before exit."""
    if _policy != "auto" or not _background or not name or name in _spawned or name in _requested:
        return
    _requested.append(name)
    if not _spawned and not _deferred:
        _spawn([*CORE, *_requested])


_deferred = False


def defer_background():
    """Start this process's background build at its exit, not at the first eager kernel:
    for a short process (a ``loopdyn`` command) on a machine with few cores, whose run
    ends long before a build would (77-301 s for the README's workload on 2 busy cores),
    a build beside it only takes the CPU from it."""
    global _deferred
    _deferred = True


def _spawn(names):
    names = [n for n in dict.fromkeys(names) if n not in _spawned]
    if not names:
        return
    _spawned.update(names)
    env = dict(os.environ, LOOPDYN_TIER="compiled", LOOPDYN_BACKGROUND="0")
    src = str(Path(__file__).resolve().parents[2])  # the folder holding loopdyn
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    try:
        subprocess.Popen(
            [sys.executable, "-m", "loopdyn.kernels.background", "build", *names],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # survives this process (and its Ctrl-C)
            close_fds=True,
        )
    except OSError:  # pragma: no cover - no process can be started: stay eager
        pass


@atexit.register
def _at_exit():
    rest = [n for n in _requested if n not in _spawned]
    if rest:
        _spawn(rest if _spawned else [*CORE, *rest])


def lock_path():
    """The file a background build holds while it compiles (one per package source)."""
    _package_stamp = numba_internals._package_stamp
    folder = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), f"loopdyn-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
    )
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"loopdyn-build-{_package_stamp()[:16]}.lock")


def _resolve(name):
    import importlib

    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def build(names, progress=None):
    """Compile (or load) ``names`` in this process (``module:attribute`` of ``Entry``
    objects, or of functions that compile what they run, as ``WORKLOAD``);
    ``progress(k, n, name, seconds)`` after each."""
    old = set_policy("compiled")
    try:
        for k, name in enumerate(names):
            t0 = time.perf_counter()
            obj = _resolve(name)
            if isinstance(obj, numba_internals.Entry):
                obj.build()
            elif callable(obj):
                obj()
            else:
                raise ValueError(f"{name}: not a loopdyn Entry or a workload")
            if progress is not None:
                progress(k + 1, len(names), name, time.perf_counter() - t0)
    finally:
        set_policy(old)


def entry_callable(e):
    """``Entry.callable`` under this policy: the compiled dispatcher (compiled, or
    loaded from disk, now), or the eager twin (``eager_entry``) where the policy is
    ``eager``, or ``auto`` and ``e`` is not on disk (a background build is asked for)."""
    if _policy == "eager" or (_policy == "auto" and not e.compiled and not e.is_cached()):
        note("eager")
        if _policy == "auto":
            request(e.qualified_name())
        return e.eager()
    note("compiled")
    return e.call if e.compiled else e.build()


def eager_entry(e):
    """The eager function of ``Entry`` ``e``: its kernel's twin with the inputs converted
    as the compiled entry converts them (``numba_internals.as_float64``; what cannot be
    converted raises ``TypeError``), numpy's floating-point errors ignored as compiled
    code ignores them.  It calls the compiled code instead once that is in the process
    (or, under ``auto``, on disk: looked for at most every ``RECHECK_S``)."""
    py = twin(e.kernel)
    inputs = e.inputs
    as_float64 = numba_internals.as_float64
    last = [time.perf_counter()]  # the last look at the disk cache

    def run(*args):
        if _policy != "eager":
            if e.compiled:
                return e.call(*args)
            if _policy == "compiled":
                return e.build()(*args)
            now = time.perf_counter()
            if now - last[0] > RECHECK_S:  # a background build may have finished
                last[0] = now
                if e.is_cached():
                    note("compiled")
                    return e.build()(*args)
        args = list(args)
        for k, ndim in inputs:
            a = args[k]
            if not (type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == ndim):
                b = as_float64(a, ndim)
                if b.ndim != ndim:
                    raise TypeError(f"{e.kernel.__name__}: argument {k} has {b.ndim} dimensions")
                args[k] = b
        with np.errstate(all="ignore"):
            return py(*args)

    run.entry = e
    return run


def wait(timeout=None):
    """Block until no background build holds the lock (True), or ``timeout`` s pass:
    the lock found free twice, 1.5 s apart (a build started at exit waits for the one
    before it, and takes the lock as that one lets it go)."""
    import fcntl

    t0 = time.perf_counter()
    free = 0
    with open(lock_path(), "a") as f:
        while free < 2:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
                free += 1
            except OSError:
                free = 0
            if timeout is not None and time.perf_counter() - t0 > timeout:
                return False
            time.sleep(1.5 if free else 0.2)
    return True


def _main(argv):
    """``python -m loopdyn.kernels.background build NAME ...`` (one build at a time per cache:
    a second waits for the first, then finds most of its work on disk), or ``wait``."""
    if argv[:1] == ["wait"]:
        return 0 if wait(float(argv[1]) if len(argv) > 1 else None) else 1
    if argv[:1] != ["build"]:
        print(__doc__)
        return 2
    import fcntl

    with open(lock_path(), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            os.nice(10)
        except OSError:  # pragma: no cover
            pass
        build(argv[1:])
    return 0


numba_internals.install_tier_policy(sys.modules[__name__])
