"""The compiled simulation loop (``loopdyn.sim.compiled``) equals the Python loop."""

import numpy as np
import pytest

import loopdyn as ld


@pytest.mark.parametrize(
    "integrator, kw",
    [
        ("RK45", dict(rtol=1e-9, atol=1e-9)),
        ("DOP853", dict(rtol=1e-10, atol=1e-10)),
        ("RK4", dict(dt=2e-3)),
    ],
)
@pytest.mark.parametrize("stabilization", ["projection", "none"])
def test_compiled_loop_equals_python_loop(integrator, kw, stabilization):
    model = ld.examples.four_bar()
    args = dict(t_end=1.0, integrator=integrator, stabilization=stabilization, t_eval=41, **kw)
    a = ld.simulate(model, tau=[0.5], compiled=True, **args)
    b = ld.simulate(model, tau=[0.5], compiled=False, **args)
    assert a.stats["compiled"] and "compiled" not in b.stats
    assert a.stats["steps"] == b.stats["steps"] and a.stats["nfev"] == b.stats["nfev"]
    np.testing.assert_array_equal(a.t, b.t)
    for name in ("q", "v", "energy", "residual_position"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.qdd, b.qdd, rtol=0, atol=1e-7)
    np.testing.assert_allclose(a.lam, b.lam, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(a.tau, b.tau)
    assert a.completed and isinstance(a, ld.Trajectory)


def test_compiled_loop_other_method_and_model():
    model = ld.examples.five_bar()
    args = dict(t_end=0.5, integrator="RK45", method="recursive_lambda", t_eval=11)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.energy, b.energy, rtol=0, atol=1e-9)


def test_compiled_loop_applies_or_says_why():
    model = ld.examples.four_bar()
    with pytest.raises(ValueError, match="compiled=True does not apply: tau is a Python callable"):
        ld.simulate(model, t_end=0.1, integrator="RK45", tau=lambda t, q, v: [0.0], compiled=True)
    with pytest.raises(ValueError, match="does not apply: integrator 'Radau'"):
        ld.simulate(model, t_end=0.1, integrator="Radau", compiled=True)
