"""Batched dynamics (``ld.forward_dynamics_batch`` and co.): element by element equal to
the single calls, failures reported by index, never a NaN passed off as a result."""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import flat_four_bar
from loopdyn import batch
from loopdyn.methods.common import NONFINITE_INPUT, SINGULAR


def _states(model, n, seed):
    """n consistent random states (Q, V) and random joint forces TAU of ``model``."""
    rng = np.random.default_rng(seed)
    Q = np.empty((n, model.nq))
    V = np.empty((n, model.nv))
    for i in range(n):
        q = model.q0 + 0.3 * rng.uniform(-1, 1, model.nq) * (np.arange(model.nq) == 0)
        Q[i] = ld.assemble(model, q)
        V[i] = ld.complete_velocity(model, Q[i], rng.normal(size=model.nv))
    return Q, V, rng.normal(size=(n, model.nv))


@pytest.fixture(scope="module")
def four_bar():
    model = ld.examples.four_bar()
    return model, *_states(model, 40, 0)


@pytest.mark.parametrize(
    "method", ["augmented", "slm", "sslm", "recursive_lambda", "embedding", "rcr", "denoc"]
)
def test_forward_batch_equals_single_calls(four_bar, method, monkeypatch):
    monkeypatch.setattr(ld.batch, "MIN_CHUNK", 1)  # two chunks of 20: the parallel path
    model, Q, V, TAU = four_bar
    res = ld.forward_dynamics_batch(model, Q, V, TAU, method=method, threads=2)
    assert res.ok and res.status.shape == (40,) and np.all(res.status > 0)
    data = model.create_data()
    for i in range(40):
        one = ld.forward_dynamics(model, Q[i], V[i], TAU[i], method=method, data=data)
        np.testing.assert_allclose(res.qdd[i], one.qdd, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(res.lam[i], one.lam, rtol=1e-13, atol=1e-13)
        assert res.status[i] == pytest.approx(1.0 / one.condition)


def test_forward_batch_spatial_ladder_and_threads(monkeypatch):
    """A spatial model (universal and ball closures); one thread (the serial path)
    equals two (the parallel one)."""
    monkeypatch.setattr(ld.batch, "MIN_CHUNK", 1)
    model = ld.examples.spatial_ladder(3)
    Q, V, TAU = _states(model, 12, 1)
    a = ld.forward_dynamics_batch(model, Q, V, TAU, method="recursive_lambda", threads=2)
    b = ld.forward_dynamics_batch(model, Q, V, TAU, method="recursive_lambda", threads=1)
    np.testing.assert_array_equal(a.qdd, b.qdd)
    for i in range(12):
        one = ld.forward_dynamics(model, Q[i], V[i], TAU[i], method="recursive_lambda")
        np.testing.assert_allclose(a.qdd[i], one.qdd, rtol=1e-12, atol=1e-12)


def test_forward_batch_keeps_its_template_per_model_and_method():
    """The bound entry a batch makes (a Data, a first single call, the rank detection:
    ~300 µs) is kept per model and method (``batch._TEMPLATES``, weak): a later batch,
    also one whose first states are singular, starts from it and still equals the
    single calls; the model is freed with its template."""
    import gc
    import weakref

    model = flat_four_bar()
    Q, V, TAU = _states(model, 6, 3)
    a = ld.forward_dynamics_batch(model, Q, V, TAU, method="slm")
    call = ld.batch._TEMPLATES[model]["slm"]
    Q2 = np.vstack([np.zeros((3, 3)), Q])  # three singular states first (pivots collinear)
    V2 = np.vstack([np.tile([1.0, -1.5, 0.0], (3, 1)), V])
    TAU2 = np.vstack([np.zeros((3, 3)), TAU])
    b = ld.forward_dynamics_batch(model, Q2, V2, TAU2, method="slm", on_error="report")
    assert ld.batch._TEMPLATES[model]["slm"] is call
    assert b.failed.tolist() == [0, 1, 2] and b.fallbacks == 3
    np.testing.assert_array_equal(b.qdd[3:], a.qdd)
    for i in range(6):
        one = ld.forward_dynamics(model, Q[i], V[i], TAU[i], method="slm", data=model.create_data())
        np.testing.assert_allclose(a.qdd[i], one.qdd, rtol=1e-13, atol=1e-13)
    ref = weakref.ref(model)
    del model, a, b
    gc.collect()
    assert ref() is None


def test_forward_batch_takes_every_input_kind_as_the_c_path(four_bar):
    """Inputs already in the compiled loop's type pass as they are (``batch._ready``);
    read-only, Fortran-ordered, float32 and strided ones are converted, with the same
    answer."""
    model, Q, V, TAU = four_bar
    Q, V, TAU = Q[:40], V[:40], TAU[:40]
    ref = ld.forward_dynamics_batch(model, Q, V, TAU, method="slm")
    ro = Q.copy()
    ro.flags.writeable = False
    wide = np.zeros((40, 2 * model.nq))
    wide[:, ::2] = Q
    for q in (ro, np.asfortranarray(Q), wide[:, ::2]):
        res = ld.forward_dynamics_batch(model, q, np.asfortranarray(V), TAU, method="slm")
        np.testing.assert_array_equal(res.qdd, ref.qdd)
        np.testing.assert_array_equal(res.lam, ref.lam)
    res = ld.forward_dynamics_batch(model, Q.astype(np.float32), V, TAU, method="slm")
    q32 = Q.astype(np.float32).astype(float)
    exp = ld.forward_dynamics_batch(model, q32, V, TAU, method="slm")
    np.testing.assert_array_equal(res.qdd, exp.qdd)
    assert batch._ready(Q, Q.shape) and not batch._ready(ro, Q.shape)
    assert not batch._ready(np.asfortranarray(Q), Q.shape) and not batch._ready(Q, (40, 1))


def test_forward_batch_broadcasts_tau_and_accepts_lists(four_bar):
    model, Q, V, _ = four_bar
    tau = np.array([1.0, 0.0, 0.0])
    res = ld.forward_dynamics_batch(model, Q[:3].tolist(), V[:3], tau)
    for i in range(3):
        np.testing.assert_allclose(res.qdd[i], ld.forward_dynamics(model, Q[i], V[i], tau).qdd)
    with pytest.raises(ValueError, match=r"TAU must have shape \(3, 3\)"):
        ld.forward_dynamics_batch(model, Q[:3], V[:3], np.zeros((2, 3)))
    with pytest.raises(ValueError, match="Q must have shape"):
        ld.forward_dynamics_batch(model, Q[:, :2], V)
    with pytest.raises(ValueError, match="unknown method"):
        ld.forward_dynamics_batch(model, Q, V, method="nope")


def test_singular_and_nonfinite_elements_reported_by_index():
    model = flat_four_bar()
    Q = np.tile(model.q0, (6, 1))
    V = np.zeros((6, 3))
    Q[2] = 0.0  # all pivots collinear: singular
    V[2] = [1.0, -1.5, 0.0]
    Q[4, 1] = np.nan
    with pytest.raises(ld.SingularityError, match=r"2 of 6 states failed .* indices 2, 4"):
        ld.forward_dynamics_batch(model, Q, V, method="augmented")
    res = ld.forward_dynamics_batch(model, Q, V, method="augmented", on_error="report")
    assert res.failed.tolist() == [2, 4] and not res.ok
    assert res.status[2] == SINGULAR and res.status[4] == NONFINITE_INPUT
    assert np.all(np.isnan(res.qdd[[2, 4]])) and np.all(np.isfinite(res.qdd[[0, 1, 3, 5]]))
    one = ld.forward_dynamics(model, Q[0], V[0], method="augmented", data=model.create_data())
    np.testing.assert_allclose(res.qdd[0], one.qdd, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="on_error"):
        ld.forward_dynamics_batch(model, Q, V, on_error="ignore")
    only_nan = ld.forward_dynamics_batch(model, Q[3:5], V[3:5], on_error="report")
    assert only_nan.failed.tolist() == [1]
    with pytest.raises(ValueError, match=r"1 states hold NaN or inf: 1"):
        ld.forward_dynamics_batch(model, Q[3:5], V[3:5])


def test_tree_batches_equal_single_calls(four_bar):
    model, Q, V, TAU = four_bar
    a = ld.aba_batch(model, Q, V, TAU)
    r = ld.rnea_batch(model, Q, V, a.qdd)
    for i in range(40):
        np.testing.assert_allclose(a.qdd[i], ld.aba(model, Q[i], V[i], TAU[i]), rtol=1e-14)
        np.testing.assert_allclose(r.tau[i], ld.rnea(model, Q[i], V[i], a.qdd[i]), rtol=1e-14)
    np.testing.assert_allclose(r.tau, TAU, rtol=1e-10, atol=1e-10)  # rnea inverts aba
    Q2 = Q[:3].copy()
    Q2[1, 0] = np.inf
    res = ld.aba_batch(model, Q2, V[:3], TAU[:3], on_error="report")
    assert res.failed.tolist() == [1] and np.all(np.isnan(res.qdd[1]))


def test_tree_model_forward_batch_is_aba():
    model = ld.examples.serial_arm()
    rng = np.random.default_rng(3)
    Q = np.tile(model.q0, (5, 1)) + 0.1 * rng.normal(size=(5, model.nq))
    V = rng.normal(size=(5, model.nv))
    res = ld.forward_dynamics_batch(model, Q, V, None, method="sslm")
    assert np.all(res.status > 0)
    for i in range(5):
        np.testing.assert_allclose(res.qdd[i], ld.aba(model, Q[i], V[i], np.zeros(model.nv)))


def test_inverse_batch_equals_single_calls(four_bar):
    model, Q, V, _ = four_bar
    tau = np.zeros((40, 3))
    tau[:, 0] = np.linspace(-2, 2, 40)
    fd = ld.forward_dynamics_batch(model, Q, V, tau)
    inv = ld.inverse_dynamics_batch(model, Q, V, fd.qdd)
    assert inv.ok
    np.testing.assert_allclose(inv.tau, tau, atol=1e-9)
    for i in range(0, 40, 7):
        one = ld.inverse_dynamics(model, Q[i], V[i], fd.qdd[i])
        np.testing.assert_allclose(inv.tau[i], one.tau, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(inv.lam[i], one.lam, rtol=1e-12, atol=1e-12)
    bad = fd.qdd[:4].copy()
    bad[1] += 1.0  # violates J q̈ = γ: the single call raises ActuationError
    with pytest.raises(ld.ActuationError):
        ld.inverse_dynamics(model, Q[1], V[1], bad[1])
    res = ld.inverse_dynamics_batch(model, Q[:4], V[:4], bad, on_error="report")
    assert res.failed.tolist() == [1] and np.all(np.isnan(res.tau[1]))
    with pytest.raises(ld.SingularityError, match="indices 1"):
        ld.inverse_dynamics_batch(model, Q[:4], V[:4], bad)


def _ctrl_c_after(monkeypatch, name, calls):
    """Replace ``loopdyn.batch.<name>`` by the same compiled call followed, at its
    ``calls``-th call, by a KeyboardInterrupt (a Ctrl-C delivered as it returns)."""
    real = getattr(ld.batch, name)
    count = [0]

    def wrapped(*args):
        real(*args)
        count[0] += 1
        if count[0] == calls:
            raise KeyboardInterrupt

    monkeypatch.setattr(ld.batch, name, wrapped)


@pytest.mark.parametrize(
    "kind, compiled", [("fd", "_fd_serial"), ("aba", "_tree_chunks"), ("inv", "_inverse_chunks")]
)
def test_ctrl_c_stops_a_batch_between_blocks_and_keeps_the_finished_rows(
    four_bar, monkeypatch, kind, compiled
):
    """BLOCK = 8: a Ctrl-C as the third block returns leaves the first two blocks as results
    (equal to the uninterrupted batch), the rest INTERRUPTED and NaN; BatchInterrupted is
    a KeyboardInterrupt."""
    model, Q, V, TAU = four_bar
    fd = ld.forward_dynamics_batch(model, Q, V, TAU)

    def call():
        if kind == "fd":
            return ld.forward_dynamics_batch(model, Q, V, TAU, threads=1)
        if kind == "aba":
            return ld.aba_batch(model, Q, V, TAU, threads=1)
        return ld.inverse_dynamics_batch(model, Q, V, fd.qdd, threads=1)

    full = call()
    monkeypatch.setattr(ld.batch, "BLOCK", 8)
    _ctrl_c_after(monkeypatch, compiled, 3)
    with pytest.raises(ld.BatchInterrupted, match="16 of 40 states done") as e:
        call()
    assert isinstance(e.value, KeyboardInterrupt)
    res = e.value.result
    np.testing.assert_array_equal(res.out[:16], full.out[:16])
    np.testing.assert_array_equal(res.status[:16], full.status[:16])
    assert np.all(res.status[16:] == ld.batch.INTERRUPTED) and np.all(np.isnan(res.out[16:]))
    if res.lam is not None:
        assert np.all(np.isnan(res.lam[16:]))


def test_ctrl_c_during_the_single_call_fallbacks(four_bar, monkeypatch):
    """Elements the fast path left to the single-call path: those not reached when Ctrl-C
    comes are INTERRUPTED, not failures."""
    model, Q, V, TAU = four_bar
    Q2 = Q.copy()
    Q2[[3, 5, 7], 0] = np.nan  # three elements for the checked path
    real = ld.batch.dynamics.forward_dynamics
    seen = []

    def fd(model, q, *a, **k):
        if not np.isfinite(q).all():
            seen.append(1)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return real(model, q, *a, **k)

    monkeypatch.setattr(ld.batch.dynamics, "forward_dynamics", fd)
    with pytest.raises(ld.BatchInterrupted, match="38 of 40 states done") as e:
        ld.forward_dynamics_batch(model, Q2, V, TAU)
    st = e.value.result.status
    assert st[3] == NONFINITE_INPUT and st[5] == st[7] == ld.batch.INTERRUPTED
    assert np.all(st[[i for i in range(40) if i not in (3, 5, 7)]] > 0)
