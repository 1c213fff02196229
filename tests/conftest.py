"""Shared fixtures and helpers of the loopdyn test-suite.

Models are built once per session (``tree_model``) and their Pinocchio exports
cached; random states are drawn from seeded generators so that every failure is
reproducible.
"""

import os
import time
from functools import cache

# the test-suite checks the compiled tier (loopdyn.kernels.tiers); tests/test_tiers.py
# holds the eager tier to it.  Set before loopdyn is imported (subprocesses inherit it).
os.environ.setdefault("LOOPDYN_TIER", "compiled")

import numpy as np
import pytest

import loopdyn as ld

# (kind, n, seed) of the tree models every Pinocchio cross-check runs on.  The
# random trees mix revolute, prismatic, universal, spherical, free and fixed
# joints (test_model.test_tree_cases_cover_every_joint_type guards that).
TREE_CASES = {
    "random10-s0": ("random_tree", 10, 0),
    "random10-s1": ("random_tree", 10, 1),
    "random10-s2": ("random_tree", 10, 2),
    "random30-s0": ("random_tree", 30, 0),
    "random30-s1": ("random_tree", 30, 1),
    "random60-s0": ("random_tree", 60, 0),
    "random60-s3": ("random_tree", 60, 3),
    "serial_arm": ("serial_arm", None, None),
    "spatial_ladder_tree4": ("spatial_ladder_tree", 4, None),
}


@cache
def build_model(case):
    """The (cached, frozen) model of a ``TREE_CASES`` key."""
    kind, n, seed = TREE_CASES[case]
    if kind == "random_tree":
        return ld.examples.random_tree(n, seed)
    if kind == "serial_arm":
        return ld.examples.serial_arm()
    return ld.examples.spatial_ladder_tree(n)


@cache
def build_export(case):
    """The (cached) Pinocchio export of a ``TREE_CASES`` key."""
    from loopdyn.interop.pinocchio import PinocchioExport

    return PinocchioExport(build_model(case))


# the random trees all hold spherical and/or free joints (quaternions)
QUATERNION_CASES = sorted(c for c, spec in TREE_CASES.items() if spec[0] == "random_tree")
# finite differences cost O(nv) kinematics calls: skip the 60-body trees
SMALL_CASES = sorted(c for c in TREE_CASES if not c.startswith("random60"))


@pytest.fixture(params=sorted(TREE_CASES))
def case(request):
    """Name of a tree case; use ``build_model(case)`` / ``build_export(case)``."""
    return request.param


@pytest.fixture(params=QUATERNION_CASES)
def quat_case(request):
    """Name of a tree case with at least one quaternion in q."""
    assert quaternion_slices(build_model(request.param))
    return request.param


@pytest.fixture(params=SMALL_CASES)
def small_case(request):
    """Name of a tree case small enough for finite differences."""
    return request.param


def random_state(model, seed):
    """A reproducible random (q, v, a-or-tau) triple of ``model``."""
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    u = rng.normal(size=model.nv)
    return q, v, u


def assert_close(actual, desired, rtol=1e-10, err_msg=""):
    """assert_allclose with ``rtol`` and an absolute floor of ``rtol`` times ‖desired‖."""
    desired = np.asarray(desired)
    atol = rtol * max(1.0, float(np.linalg.norm(desired)))
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, err_msg=err_msg)


def quaternion_slices(model):
    """Slices of q holding a quaternion (w, x, y, z), from the joint types."""
    out = []
    for i, jt in enumerate(model.joint_types):
        s = model.q_slice(i)
        if jt == "spherical":
            out.append(s)
        elif jt == "free":
            out.append(slice(s.start + 3, s.stop))
    return out


def quat_to_rot(qu):
    """Rotation matrix of a (w, x, y, z) quaternion (normalised first)."""
    w, x, y, z = np.asarray(qu, dtype=float) / np.linalg.norm(qu)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def assert_same_configuration(model, q1, q2, atol=1e-10):
    """q1 and q2 describe the same configuration (quaternions compared as rotations)."""
    q1 = np.asarray(q1, dtype=float)
    q2 = np.asarray(q2, dtype=float)
    assert q1.shape == q2.shape == (model.nq,)
    euclid = np.ones(model.nq, dtype=bool)
    for s in quaternion_slices(model):
        euclid[s] = False
        np.testing.assert_allclose(
            quat_to_rot(q1[s]), quat_to_rot(q2[s]), atol=atol, err_msg=f"rotation at q[{s}]"
        )
    np.testing.assert_allclose(q1[euclid], q2[euclid], atol=atol)


def log3(R):
    """Rotation vector of a rotation matrix close to the identity (|angle| < π/2)."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    th = np.arccos(c)
    w = 0.5 * np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    return w if th < 1e-12 else w * th / np.sin(th)


# ---- every kernel compiles once per signature (issue 38): numba's compile events of the
# whole test process, keyed by the function and its argument types; a second compile of
# the same key (a dispatcher made again, or a callee recompiled under other flags) fails
# the session at its end, naming the kernels
class CompileLog:
    """(module.qualname, argument types, dispatcher) -> number of numba compilations seen
    (a dispatcher made anew, as ``controller_address`` makes one per controller, is
    another key)."""

    def __init__(self):
        self.counts = {}
        self.keep = []  # the dispatchers seen (their ids stay theirs)
        self.seconds = {}  # module.qualname -> wall seconds of its outermost compilations
        self.depth = 0
        self.t0 = 0.0

    def key(self, ev):
        disp = ev.data["dispatcher"]
        self.keep.append(disp)
        f = disp.py_func
        return f"{f.__module__}.{f.__qualname__}", tuple(str(a) for a in ev.data["args"]), id(disp)

    def twice(self, prefix="loopdyn"):
        """The keys of loopdyn's kernels compiled more than once."""
        return sorted(k for k, n in self.counts.items() if n > 1 and k[0].startswith(prefix))


def _install_compile_log():
    from numba.core import event

    log = CompileLog()

    class _Listener(event.Listener):
        def on_start(self, ev):
            k = log.key(ev)
            log.counts[k] = log.counts.get(k, 0) + 1
            if log.depth == 0:
                log.t0 = time.perf_counter()
            log.depth += 1

        def on_end(self, ev):
            log.depth -= 1
            if log.depth == 0:  # an outermost compile: its callees' time included
                name = log.key(ev)[0]
                log.seconds[name] = log.seconds.get(name, 0.0) + time.perf_counter() - log.t0

    event.register("numba:compile", _Listener())
    return log


COMPILE_LOG = _install_compile_log()


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (README's test command): one worker per core, at most 4.  A cold run
    is mostly numba compiling, one core per process: two workers halve it on the
    2-core machines CI runs on; beyond four, each worker compiles the kernels its files
    need again (``--dist loadfile`` keeps a file on one worker) and memory grows."""
    return max(1, min(4, os.cpu_count() or 1))


# under pytest-xdist (README's ``-n auto``) each worker is a process of its own: a worker
# sends its compile log to the controller (xdist's workeroutput), which reports them all
_WORKER_LOGS = []  # on the controller: (worker id, seconds by kernel, twice) per worker


def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", {}).get("loopdyn_compile")
    if out is not None:
        _WORKER_LOGS.append((node.gateway.id, out["seconds"], out["twice"]))


def pytest_sessionfinish(session, exitstatus):
    seconds = dict(COMPILE_LOG.seconds)
    twice = [(f"{name} {args}", "") for name, args, _ in COMPILE_LOG.twice()]
    worker = getattr(session.config, "workeroutput", None)
    if worker is not None:  # an xdist worker: the controller reports
        worker["loopdyn_compile"] = {"seconds": seconds, "twice": [t for t, _ in twice]}
        return
    for wid, secs, tw in _WORKER_LOGS:
        for name, sec in secs.items():
            seconds[name] = seconds.get(name, 0.0) + sec
        twice += [(t, f" (worker {wid})") for t in tw]
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get("LOOPDYN_COMPILE_REPORT"):  # where a cold run's compiling went
        total = sum(seconds.values())
        tr.write_line(f"numba compiling (outermost calls): {total:.1f} s over the processes")
        top = sorted(seconds.items(), key=lambda kv: -kv[1])
        for name, sec in top[: int(os.environ["LOOPDYN_COMPILE_REPORT"])]:
            tr.write_line(f"  {sec:7.2f} s  {name}")
    if twice:
        lines = "\n".join(f"  {t}{w}" for t, w in twice)
        tr.write_line(
            f"FAILED: kernels compiled twice for the same signature in one process:\n{lines}",
            red=True,
        )
        session.exitstatus = 1
