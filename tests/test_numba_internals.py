"""The numba internals loopdyn relies on (``loopdyn.kernels.numba_internals``).

If a numba release changes one of them, these tests fail with a message that says
which, instead of loopdyn silently getting slower or wrong.
"""

import sys
import timeit

import numpy as np
import pytest
from numba import njit, types
from numba.core.errors import TypingError

from loopdyn.kernels import numba_internals as ni


def test_entries_compile_without_reference_counting():
    from loopdyn.methods import augmented

    k = augmented.ENTRY.compile()
    assert k.targetoptions.get("_nrt") is False, (
        "numba no longer keeps the _nrt=False option of loopdyn's entries"
    )


def test_block_views_share_memory_and_reinterpret_ints():
    @njit
    def views(buf):
        a = ni.block(buf, 2, (2, 3))
        b = ni.block_int(buf, 0, 2)
        return a, b

    buf = np.arange(10.0)
    buf[:2].view(np.int64)[:] = (7, -3)
    a, b = views(buf)
    np.testing.assert_array_equal(a, np.arange(2.0, 8.0).reshape(2, 3))
    assert b.dtype == np.int64 and list(b) == [7, -3]
    a[0, 0] = 42.0
    assert buf[2] == 42.0


def test_row_views_share_memory_and_hold_no_reference():
    @njit
    def rows(A):
        s = 0.0
        for i in range(A.shape[0]):
            r = ni.row(A, i)
            r[0] += 1.0
            s += r[r.shape[0] - 1]
        return s, ni.row(A, 1).shape[0]

    A = np.arange(12.0).reshape(4, 3)
    before = sys.getrefcount(A)
    s, n = rows(A)
    assert s == 2.0 + 5.0 + 8.0 + 11.0 and n == 3
    np.testing.assert_array_equal(A[:, 0], [1.0, 4.0, 7.0, 10.0])
    assert sys.getrefcount(A) == before
    # C-contiguous 2-D arrays only
    with pytest.raises(TypingError):
        njit(lambda A: ni.row(A, 0))(np.zeros((2, 2), order="F"))


def test_as_input_retypes_without_copy():
    @njit
    def f(x):
        y = ni.as_input(x)
        return y[1] + y.shape[0]

    x = np.arange(3.0)
    assert f(x) == 4.0
    (sig,) = f.nopython_signatures
    assert sig.args[0] == types.float64[::1]


def test_entry_takes_float64_vectors_as_they_are_and_converts_the_rest_once():
    @ni.entry
    def kernel(ctx, q, out):
        out[0] = q[0] + q[q.shape[0] - 1] + ctx[0]
        return 1.0

    e = ni.Entry(kernel, types.float64, ni.BUF, ni.IN, ni.OUT)
    ctx, out = np.zeros(1), np.zeros(1)
    c = np.arange(4.0)
    ro = c.copy()
    ro.setflags(write=False)
    for q in (c, ro, np.arange(8.0)[::2], c[::-1]):
        assert e.call(ctx, q, out) == 1.0
        assert out[0] == q[0] + q[-1]
    (sig,) = e.kernel.nopython_signatures
    assert sig.args == e.signature.args  # nothing else was compiled
    # converted by numba's fallback (the forwarder), with the same answer
    for q in ([1.0, 2.0, 5.0], (1, 2, 5), np.array([1, 2, 5]), np.float32([1, 2, 5]),
              np.asfortranarray([[1.0], [2.0], [5.0]]), [True, False, True]):  # fmt: skip
        out[0] = np.nan
        assert e.call(ctx, q, out) == 1.0
        assert out[0] == float(np.ravel(q)[0]) + float(np.ravel(q)[-1]), q
    (sig,) = e.kernel.nopython_signatures
    assert sig.args == e.signature.args  # still nothing else compiled
    # not real numbers, or a wrong argument that is not an input: TypeError, no crash
    for bad in (["a", "b"], [1j, 2.0], np.array([1j]), {"q": 1.0}, [[1.0], [2.0, 3.0]]):
        with pytest.raises(TypeError):
            e.call(ctx, bad, out)
    wrong = (
        (ctx, out.astype(np.float32)),
        (ctx, out.reshape(1, 1)),
        (ctx, np.zeros(4)[::2]),
        (ctx.astype(np.int64), out),
        (ctx, [0.0]),
    )
    for ctx_bad, out_bad in wrong:
        with pytest.raises(TypeError):
            e.call(ctx_bad, [1.0, 2.0], out_bad)
        with pytest.raises(TypeError):
            e.call(ctx_bad, c, out_bad)

    def converted():
        e.call(ctx, [1.0, 2.0], out)

    per_call = min(timeit.repeat(converted, number=200, repeat=3)) / 200
    # numba's own explanation types every argument in Python (~100 µs); the fallback
    # converts (~1 µs).  A generous bound: this is a check of the hook, not a timing.
    assert per_call < 20e-6, f"converting a list took {per_call * 1e6:.0f} µs: the hook is gone"


def test_builtin_forwarder_calls_its_function():
    f = ni.builtin_forwarder(lambda *a, **k: (a, k))
    assert type(f) is type(len)  # what numba's dispatcher accepts as a definition
    assert f(1, 2, x=3) == ((1, 2), {"x": 3})


def test_loopdyn_kernels_are_cached_against_the_whole_package_source():
    """A kernel's disk cache is stamped with every loopdyn source file: editing a callee
    in another file can no longer leave a caller running the old code."""
    from loopdyn.tree.aba import aba_kernel

    locator = aba_kernel._cache._impl._locator
    assert type(locator).__module__ == ni.__name__, type(locator)
    assert locator.get_source_stamp() == ni._package_stamp()


def test_entry_knows_whether_its_compiled_code_is_cached():
    import numpy as np

    import loopdyn as ld
    from loopdyn.methods import augmented

    model = ld.examples.four_bar()
    ld.forward_dynamics(model, model.q0, np.zeros(3))  # compiled or loaded: cached now
    fresh = ni.Entry(augmented.ENTRY.kernel, augmented.ENTRY.signature.return_type,
                     *augmented.ENTRY.signature.args)  # fmt: skip
    fresh.compiled = False
    assert fresh.is_cached()


def test_a_compiled_function_is_called_at_its_address():
    """``address_of`` / ``call_*``: a method entry and a controller adapter called at
    their native addresses give the direct calls' answers; exceptions raised there
    propagate; arguments of another kind do not type."""
    import loopdyn as ld
    from loopdyn.methods import dynamics

    model = ld.examples.four_bar()
    q = np.array(model.q0)
    v = ld.complete_velocity(model, q, np.array([1.0, 0.0, 0.0]))
    tau = np.array([0.3, 0.0, 0.0])
    for method in ("augmented", "rcr"):  # without and with a plan buffer
        ref = ld.forward_dynamics(model, q, v, tau, method=method)
        ctx, pb = dynamics.bound_buffers(model._data.bound[method][0])
        qdd, lam = np.empty(3), np.empty(model.m)

        @njit
        def at(fn, ctx, pb, q, v, tau, qdd, lam):
            return dynamics.method_call(fn, ctx, pb, q, v, tau, qdd, lam)

        st = at(dynamics.method_pointer(method), ctx, pb, q, v, tau, qdd, lam)
        assert st > 0.0
        np.testing.assert_array_equal(qdd, ref.qdd)

    @njit
    def raises(t, q, v, out, act):
        if t > 1.0:
            raise ValueError("late")
        out[act[0]] = t
        return True

    raises.compile(ni.CONTROLLER)
    addr = ni.address_of(raises, ni.CONTROLLER)

    @njit
    def ctl(addr, t, q, v, out, act):
        return ni.call_controller_at(addr, t, q, v, out, act)

    out, act = np.zeros(3), np.array([1], dtype=np.int64)
    assert ctl(addr, 0.5, q, v, out, act) and out[1] == 0.5
    with pytest.raises(ValueError, match="late"):
        ctl(addr, 2.0, q, v, out, act)
    with pytest.raises(Exception, match="call_controller_at"):
        ctl(addr, 0.5, q, v, out, act.astype(np.float64))  # act of another dtype
    # an entry whose signature is not a method entry's is refused, not called wrongly
    from loopdyn.kinematics.closures import CONSTRAINTS

    with pytest.raises(TypeError, match="not a method entry's signature"):
        ni.entry_pointer(CONSTRAINTS)
    # the pointer is kept on the entry after the first lookup, and stays its address
    from loopdyn.methods import slm

    first = ni.entry_pointer(slm.ENTRY)
    assert ni.entry_pointer(slm.ENTRY) is first
    assert first == (ni.address_of(slm.ENTRY.compile(), slm.ENTRY.signature.args), 0)


def test_importing_loopdyn_turns_off_numbas_error_colouring():
    """numba's NOPColorScheme (no colorama call per rejected overload while typing) when
    loopdyn is imported first; numba renames the variable or the class: this fails."""
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING', None)\n"
        "import loopdyn, numba.core.errors as e\n"
        "print(type(e.termcolor()).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "NOPColorScheme"


def test_call_type_memo_returns_numbas_types():
    """``install_call_type_memo``: a memoised call type is the one numba computes, with
    the implementation key numba records; a call no template fits raises every time."""
    import operator

    from numba.core import errors
    from numba.core.registry import cpu_target
    from numba.core.types import functions

    memoised = functions.BaseFunction.get_call_type
    assert getattr(memoised, "_loopdyn", False), "loopdyn's call-type memo not installed"
    numba_own = memoised.numba
    ctx = cpu_target.typing_context
    ctx.refresh()
    calls = [
        (operator.mul, (types.float64, types.float64)),
        (operator.add, (types.int64, types.float64)),
        (operator.lt, (types.IntegerLiteral(3), types.int64)),
        (np.cos, (types.float64,)),
        (max, (types.float64, types.float64)),
    ]
    for fn, args in calls:
        fnty = ctx.resolve_value_type(fn)
        assert isinstance(fnty, functions.BaseFunction), fn
        expected = numba_own(fnty, ctx, args, {})
        first = memoised(fnty, ctx, args, {})
        assert first == expected, (fn, args)
        key = fnty._impl_keys[first.args]
        assert key is not None
        fnty._impl_keys[first.args] = None  # numba sets it on every call it types
        assert memoised(fnty, ctx, args, {}) == first
        assert fnty._impl_keys[first.args] is key, "the memo must restore the impl key"
    fnty = ctx.resolve_value_type(operator.mul)
    bad = (types.unicode_type, types.NoneType("none"))
    for _ in range(2):
        with pytest.raises(errors.TypingError):
            memoised(fnty, ctx, bad, {})


def _returns_a_view(fn):
    """True if a return statement of function node ``fn`` calls ``block`` / ``block_int``."""
    import ast

    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            for call in ast.walk(node.value):
                if isinstance(call, ast.Call) and getattr(call.func, "id", "") in (
                    "block",
                    "block_int",
                ):
                    return True
    return False


def test_kernels_that_return_views_are_inlined():
    """numba_internals item 1: a jitted function returning a ``block`` view is compiled
    into each caller with the caller's reference counting (inline="always")."""
    import ast
    import importlib
    from pathlib import Path

    import loopdyn

    root = Path(loopdyn.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and _returns_a_view(fn):
                mod = ".".join(("loopdyn", *path.relative_to(root).with_suffix("").parts))
                disp = getattr(importlib.import_module(mod), fn.name)
                found.append(f"{mod}.{fn.name}")
                assert disp.targetoptions.get("inline") == "always", found[-1]
    assert "loopdyn.methods.common.plan_views" in found  # sslm's, embedding's and rcr's


def test_views_returned_into_reference_counted_code_keep_their_buffer():
    """A compiled loop with reference counting (a benchmark's, a user's) calling the
    plans' ``plan_views`` after an entry (no counting) used them: the buffer's
    reference count is unchanged and the process survives (it aborted, a double free,
    when ``plan_views`` was compiled once, without counting, for both)."""
    import subprocess
    import sys

    script = """
import sys
import numpy as np
from numba import njit
from loopdyn.methods import embedding, sslm

@njit(_nrt=False)  # as an entry (numba_internals.entry), uncached
def first(pbuf):
    a, b = sslm.plan_views(pbuf)
    c, d = embedding.plan_views(pbuf)
    return a[0] + c[0]

@njit
def loop(pbuf, n):
    s = 0.0
    for _ in range(n):
        a, b = sslm.plan_views(pbuf)
        c, d = embedding.plan_views(pbuf)
        s += b[0] + d[0]
    return s

buf = np.zeros(16)
buf[:1].view(np.int64)[0] = 4
first(buf)
before = sys.getrefcount(buf)
loop(buf, 1000)
assert sys.getrefcount(buf) == before, (before, sys.getrefcount(buf))
@njit
def other(x):
    return np.sin(x).sum()
other(np.ones(3))
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def test_counted_callees_free_what_they_allocate_under_an_entry(tmp_path):
    """A callee compiled first inside an entry (no reference counting) inherits the flag:
    what it allocates is never freed (10 arrays made, 0 freed), or numba refuses to
    compile it (an allocating numpy function returning its array); ``counted`` keeps
    counting for it whoever calls it first, and it frees what it allocates (numba's
    allocation counters, ``NUMBA_NRT_STATS=1``, in a subprocess)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "counted.py"
    script.write_text(
        """
import numpy as np
from numba import njit
from numba.core.runtime import rtsys
from loopdyn.kernels import numba_internals as ni

@ni.counted
def counted(n):
    return np.ones(n).sum()

@njit(cache=True)
def plain(n):  # the same code, left to inherit its caller's flag
    return np.ones(n).sum()

@ni.entry
def uses_counted(n):
    return counted(n)

@ni.entry
def uses_plain(n):
    return plain(n)

for f in (uses_counted, uses_plain):
    try:
        f(3)
    except Exception as e:
        print(type(e).__name__, " ".join(str(e).split()))
        continue
    s0 = rtsys.get_allocation_stats()
    for _ in range(10):
        f(3)
    s1 = rtsys.get_allocation_stats()
    print(f.__name__, s1.alloc - s0.alloc, s1.free - s0.free)
"""
    )
    env = dict(os.environ, NUMBA_NRT_STATS="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln.split() for ln in r.stdout.split("\n") if ln.startswith("uses_")]
    got = {name: (int(a), int(f)) for name, a, f in lines}
    assert got.get("uses_counted") == (10, 10), r.stdout
    # the inheritance counted guards against; if a numba release changes it, counted
    # may be moot
    assert got.get("uses_plain") == (10, 0) or "Only accept returning" in r.stdout, r.stdout


# kernels that may be compiled for more than one signature on the path below, and why
# (each small: < 0.3 s of compilation on an empty cache)
_SEVERAL_SIGNATURES = {
    "loopdyn.kernels.spatial._rotate_block": "its block offsets and triangle flag as constants",
    "loopdyn.kernels.checks.bad_quaternion": "user inputs and workspace arrays",
    "loopdyn.kernels.checks.all_finite": "user inputs and workspace arrays",
    "loopdyn.methods.common.max_abs": "user inputs and workspace arrays",
    "loopdyn.kernels.linalg.forward_subst": "a workspace column and a contiguous vector",
    "loopdyn.sim.compiled._put": "float and int vectors",
    "loopdyn.sim.compiled._repartition": "its object-mode block and itself",
    "loopdyn.sim.compiled._checkpoint": "its object-mode block and itself",
    "loopdyn.sim.compiled._reselect": "its object-mode block and itself",
}


@pytest.mark.slow
def test_every_kernel_is_compiled_once(tmp_path):
    """On an empty cache, the four-bar's forward dynamics by every method and a simulation
    compile each loopdyn kernel for one signature (``docs/architecture.md``: a constant
    argument or a workspace array where a user input goes makes numba compile a kernel
    again; embedding's articulated pass was compiled twice, ~2 s, its refinement passing a
    C array where the entry passes τ).  Lists the offenders with their compile times."""
    import os
    import subprocess
    import sys

    script = """
import collections, time
import numpy as np
from numba.core import event
import loopdyn as ld
sigs = collections.defaultdict(list)
stack = []
class Listener(event.Listener):
    def on_start(self, ev):
        stack.append([time.perf_counter(), 0.0])
    def on_end(self, ev):
        t0, inner = stack.pop()
        dt = time.perf_counter() - t0
        if stack:
            stack[-1][1] += dt
        f = ev.data["dispatcher"].py_func
        sigs[f.__module__ + "." + f.__qualname__].append(dt - inner)
event.register("numba:compile", Listener())
m = ld.examples.four_bar(theta1=np.pi / 2)
from loopdyn.methods.dynamics import METHODS
for method in METHODS:
    ld.forward_dynamics(m, m.q0, np.zeros(m.nv), method=method)
ld.simulate(m, t_end=0.05)
for name, times in sigs.items():
    if name.startswith("loopdyn") and len(times) > 1:
        print(name, len(times), round(sum(times) - max(times), 2))
print("done")
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=900, env=env
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("done"), r.stderr[-2000:]
    twice = [ln for ln in r.stdout.splitlines()[:-1] if ln.split()[0] not in _SEVERAL_SIGNATURES]
    assert not twice, "compiled for several signatures (name, count, extra seconds):\n" + "\n".join(
        twice
    )
