"""rcr, sslm and embedding answer with their own algorithm (issue 41).

On the random closed-loop mechanisms of the census (``benchmarks/random_census.py``:
``tests/mechanisms.random_mechanism``, coupled loops, loops sharing bodies, redundant
closures, floating bases; and ``tests/parallel_mechanisms.random_parallel_mechanism``),
each of these methods must answer a well-conditioned state itself: its share of
answers handed to the dense ``augmented`` solve (``res.method``) may not exceed
``MAX_FALLBACK`` (0.5 %), and every answer, its own or the fallback's, must agree with
the dense oracle.  Before issue 41 the census (seed 11, 2000 general mechanisms, 1926 of
them well conditioned) had 82 such fallbacks of rcr (4.3 %: coupled loops solved one
after the other, a later loop left no well-conditioned Y1) and 25 of sslm (1.3 %: its
GICM pivot blocks judged by det / Π diag).  ``benchmarks/fallback_reasons.py`` says why
a method fell back.

Seeds other than the census's, small counts (a CI run: ~20 s warm).  ``-m slow``: more.
"""

import warnings

import numpy as np
import pytest

import loopdyn as ld
import mechanisms as mx
import parallel_mechanisms as pm
from closed_helpers import erd_root

METHODS = ("rcr", "sslm", "embedding")
MAX_FALLBACK = 0.005
SEED = 41


def _census(cases):
    """Per method: (fallbacks, well-conditioned states, failures) over ``cases``
    (mechanisms); a failure is an answer off the oracle or an error on a well state."""
    fallbacks = dict.fromkeys(METHODS, 0)
    bad = []
    well = 0
    for label, mech in cases:
        o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
        if not o.well:
            continue
        well += 1
        for method in METHODS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ld.FallbackWarning)
                out = mx.judge(mech, method, o, data=mech.model.create_data())
            if out.method and out.method != method:
                fallbacks[method] += 1
            if not out.ok:
                bad.append(f"{label} {method}: {out.kind} {out.error:.3g} {out.message[:120]}")
    return fallbacks, well, bad


def _check(cases):
    fallbacks, well, bad = _census(cases)
    assert not bad, "\n".join(bad)
    assert well > 0
    worst = {m: f / well for m, f in fallbacks.items()}
    assert all(f <= MAX_FALLBACK for f in worst.values()), (
        f"fallbacks to augmented on {well} well-conditioned states: {fallbacks} "
        f"(python benchmarks/fallback_reasons.py --seed {SEED} --well)"
    )


def _general(n, seed=SEED, **kw):
    for i in range(n):
        yield f"general case {i} of seed {seed}", mx.random_mechanism((seed, i), **kw)


def _parallel(n, seed=SEED):
    for i in range(n):
        yield f"parallel case {i} of seed {seed}", pm.random_parallel_mechanism((seed, i))


def test_general_mechanisms_answer_without_fallback():
    """120 random mechanisms: at most 0.5 % of the well-conditioned states (none at this
    count) handed to augmented by rcr, sslm or embedding."""
    _check(_general(120))


def test_parallel_mechanisms_answer_without_fallback():
    """60 random parallel mechanisms (platforms on 2–6 legs, near-singular leg poses)."""
    _check(_parallel(60))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["general", "large", "parallel"])
def test_census_fallbacks_slow(family):
    """The census families at larger counts (minutes)."""
    if family == "general":
        _check(_general(1000, seed=SEED + 1))
    elif family == "large":
        _check(_general(150, seed=SEED + 2, max_bodies=40))
    else:
        _check(_parallel(600, seed=SEED + 1))


def test_a_fallback_warns_once_per_model_and_method(monkeypatch):
    """A fallback is visible: ``res.method`` says ``augmented`` and one FallbackWarning
    per model and method names the method and why; ``fallback=False`` raises.  (Forced
    here: sslm's binder patched to a kernel that refuses every state as singular.)"""
    from loopdyn.methods import dynamics as D

    model = ld.examples.four_bar()
    q = model.q0
    v = ld.complete_velocity(model, q, np.zeros(model.nv))
    d = model.create_data()
    monkeypatch.setitem(D.BINDERS, "sslm", lambda model, d: lambda *a: D.SINGULAR)
    monkeypatch.delitem(model.__dict__, "_fallback_warned", raising=False)
    with pytest.warns(ld.FallbackWarning, match="'sslm' could not solve.*singular.*'augmented'"):
        res = ld.forward_dynamics(model, q, v, method="sslm", data=d)
    assert res.method == "augmented"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ld.FallbackWarning)  # once per model and method
        assert ld.forward_dynamics(model, q, v, method="sslm", data=d).method == "augmented"
    with pytest.raises(ld.SingularityError, match="fallback=False"):
        ld.forward_dynamics(model, q, v, method="sslm", data=d, fallback=False)
    d.bound.clear()


CASSIE_METHODS = ("rcr", "sslm", "embedding", "slm", "recursive_lambda")


@pytest.mark.skipif(erd_root() is None, reason="example-robot-data is not installed")
def test_cassie_in_full_answers_natively():
    """cassie.sdf in full (30 closure rows, rank 28, a shin-spring row of size 2e-6 beside
    rows of size 1): sslm and embedding fell back on q0 and 19-20 of 20 random states,
    judging rows by their absolute size (sslm's cross-block pivot bound 7e-16, embedding's
    Y1 pivots); now every method answers itself and agrees with augmented to 1e-10."""
    model = ld.load(erd_root() / "cassie_description" / "robots" / "cassie.sdf",
                    nonphysical_inertia="accept")  # fmt: skip
    rng = np.random.default_rng(5)
    states = [model.q0]
    while len(states) < 9:
        dq = 0.05 * rng.normal(size=model.nv)
        states.append(ld.assemble(model, ld.integrate(model, model.q0, dq, 1.0), fixed=[]))
    for q in states:
        v = ld.complete_velocity(model, q, rng.normal(size=model.nv), fixed=[])
        tau = rng.normal(size=model.nv)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        scale = max(1.0, np.abs(ref.qdd).max())
        for method in CASSIE_METHODS:
            res = ld.forward_dynamics(model, q, v, tau, method=method, fallback=False)
            assert res.method == method
            assert np.abs(res.qdd - ref.qdd).max() <= 1e-10 * scale, method
