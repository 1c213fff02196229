"""Recursive Coordinate Reduction (Anderson & Critchley): ``method="rcr"`` against the
augmented oracle, its loop plan (the paper's choice of independent coordinates, ladder
loops chained), run-time re-selection (Sec. 4.4) and simulation in independent
coordinates."""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import loopdyn as ld
import mechanisms as mx
from closed_helpers import catalog_states, consistent_state, flat_four_bar
from loopdyn.methods import dynamics
from loopdyn.methods import rcr as R

ACCEPTED = {
    "four_bar": {},
    "five_bar": {},
    "slider_crank": {},
    "planar_ladder": dict(L=6),
    "spatial_ladder": dict(L=5),
    "hooke_ladder": dict(L=5),
    "pendulum_ladder": dict(L=3),
    "carpet_scraper": {},
    "three_rrr": {},
    "excavator": {},
    "stewart": {},
    "delta": {},
    "closed_knee_leg": {},
    "four_bar_chain": dict(N=4),
    "four_bar_cut": dict(cut="internal"),
    "geared_chain": dict(N=3, ratio=5.0),
}


def rel(a, b):
    return float(np.abs(np.asarray(a) - b).max() / max(1.0, np.abs(b).max()))


def rcr(model, q, v, tau, data=None):
    """``forward_dynamics(method="rcr")``, asserting it did not fall back."""
    res = ld.forward_dynamics(model, q, v, tau, method="rcr", data=data)
    assert res.method == "rcr"
    return res


def test_registration():
    assert "rcr" in dynamics.METHODS and "rcr" in dynamics.SELF_RANKED
    assert "rcr" in dynamics.MINIMAL_METHODS and "rcr" not in dynamics.GENERAL_METHODS
    assert dynamics.entry_of("rcr") is R.ENTRY


@pytest.mark.parametrize("name", ACCEPTED)
def test_rcr_equals_augmented_on_the_catalog(name):
    model = ld.examples.get(name, **ACCEPTED[name])
    dynamics.check_method(model, "rcr")  # accepted: no ModelError
    rng = np.random.default_rng(7)
    for _ in range(4):
        q, v, tau = consistent_state(model, rng)
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        r = rcr(model, q, v, tau)
        assert rel(r.qdd, a.qdd) < 1e-10, name
        assert rel(r.lam, a.lam) < 1e-10, name


def test_rcr_on_inconsistent_velocities_still_solves_the_kkt_system():
    # q̈ comes from the full v (γ, velocity products), so it is augmented's answer
    model, states = catalog_states("four_bar", n=2)
    for q, v, tau in states:
        v = v + 0.1
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        assert rel(rcr(model, q, v, tau).qdd, a.qdd) < 1e-10


def test_paper_choice_of_independent_coordinates_on_the_ladder():
    """Sec. 4.3: the first loop's first n_i − m_i = 2 joints (post 0's universal joint)
    are the independent coordinates, every later loop has none (its 3 undetermined
    coordinates are all dependent) and is solved after the loop it shares a post with."""
    L = 6
    model = ld.examples.spatial_ladder(L)
    d = model.create_data()
    q, v, tau = consistent_state(model, np.random.default_rng(1))
    rcr(model, q, v, tau, data=d)
    plan = R.plan_for(model, d)
    assert len(plan.blocks) == L
    ind0, dep0 = plan.blocks[0][3:5]
    assert ind0 == (0, 1) and len(dep0) == 3
    for b in plan.blocks[1:]:
        assert b[3] == () and len(b[4]) == 3
    # chained: each loop's known coordinates were fixed by the loop before it
    for b0, b1 in zip(plan.blocks, plan.blocks[1:], strict=False):
        assert set(b0[2]) & set(b1[2])


def test_the_cost_is_linear_on_the_ladder_plan():
    """O(n + m) memory: no block grows with L (each loop's J_i is 3 × 5)."""
    for L in (8, 64):
        model = ld.examples.spatial_ladder(L)
        d = model.create_data()
        plan = R.RcrPlan(model, np.arange(model.m))
        assert max(int(b[R.B_M]) * int(b[R.B_NP]) for b in plan.table) == 15
        assert plan.fw.size < 200 * model.nv
        del d


def _spinning_loop():
    """Two hanging universal-joint posts closed by a ball joint; the ball sits on the
    axis of a spinning revolute ("spin") at the first post's tip, so the spin's column of
    J is zero: any choice making it dependent has a singular Y1 (Sec. 4.4)."""
    b = ld.ModelBuilder("spinning_loop")
    b.add_body("a", "ground", ld.Universal("x", "y"), mass=1, com=(0, 0, -0.5),
               inertia=(0.1, 0.1, 0.01))  # fmt: skip
    b.add_body("s", "a", ld.Revolute((0, 0, 1)), xyz=(0, 0, -1), mass=0.5, com=(0.1, 0, 0),
               inertia=(0.01, 0.01, 0.01))  # fmt: skip
    b.add_body("c", "ground", ld.Universal("x", "y"), xyz=(1, 0, 0), mass=1,
               com=(0, 0, -0.5), inertia=(0.1, 0.1, 0.01))  # fmt: skip
    b.add_body("r", "c", ld.Revolute((0, 1, 0)), xyz=(0, 0, -1), mass=0.5, com=(-0.5, 0, 0),
               inertia=(0.01, 0.05, 0.05))  # fmt: skip
    b.add_frame("fs", "s")
    b.add_frame("fr", "r", xyz=(-1, 0, 0))
    b.add_closure("ball", "fs", "fr", "ball")
    return b.build()


def test_an_ill_conditioned_choice_is_reselected_at_run_time():
    model = _spinning_loop()
    d = model.create_data()
    rng = np.random.default_rng(5)
    q = model.neutral()
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    rcr(model, q, v, tau, data=d)
    plan = R.plan_for(model, d)
    spin = int(model.topo[model.body_names.index("s"), 3])
    assert spin not in plan.dependent(0)  # the paper's choice is fine here
    others = [c for c in plan.dependent(0)][:2]
    plan.set_dependent(0, [spin, *others])
    assert spin in plan.dependent(0)
    r = rcr(model, q, v, tau, data=d)
    assert spin not in plan.dependent(0)  # chosen again by complete pivoting
    a = ld.forward_dynamics(model, q, v, tau, method="augmented")
    assert rel(r.qdd, a.qdd) < 1e-10 and rel(r.lam, a.lam) < 1e-10


def test_singular_loop_is_explained_with_loop_joints_and_condition():
    """The four-bar of the catalog cannot reach a singular configuration from q0 by its
    crank, so the kernel's failure is provoked with a zero J_i: explain names the loop,
    its joints and the condition number."""
    model = ld.examples.four_bar()
    d = model.create_data()
    q, v, tau = consistent_state(model, np.random.default_rng(0))
    rcr(model, q, v, tau, data=d)
    plan = R.plan_for(model, d)
    R.explain(model, d)  # nothing failed: no error
    plan.ip[R.R_FAIL] = 0
    bt = plan.table[0]
    plan.fw[bt[R.B_J] : bt[R.B_J] + bt[R.B_M] * bt[R.B_NP]] = 0.0
    with pytest.raises(ld.SingularityError, match=r"RCR loop .*condition number of Y1"):
        R.explain(model, d)


# --------------------------------------------------------------------------- independent=
@pytest.mark.parametrize(
    "independent, expect",
    [(["post3"], (9, 10)), ([9, 10], (9, 10)), (np.array([18, 19]), (18, 19)),
     (["rung2", "post2[0]"], (6, 8))],
)  # fmt: skip
def test_chosen_independent_coordinates_are_used_and_exact(independent, expect):
    """ld.forward_dynamics(..., independent=): joint names, coordinate names or indices
    into v.  On the ladder post k's universal joint independent makes loop k−1 or k the
    first solved and the chain runs both ways from it; q̈ and λ stay augmented's."""
    model = ld.examples.spatial_ladder(6)
    d = model.create_data()
    q, v, tau = consistent_state(model, np.random.default_rng(1))
    a = ld.forward_dynamics(model, q, v, tau, method="augmented")
    for _ in range(2):  # the checked path, then the fast path (bound under the choice)
        r = ld.forward_dynamics(model, q, v, tau, method="rcr", data=d, independent=independent)
        assert r.method == "rcr"
        assert rel(r.qdd, a.qdd) < 1e-10 and rel(r.lam, a.lam) < 1e-10
    plan = R.plan_for(model, d, independent)
    assert tuple(sorted(c for b in plan.blocks for c in b[3])) == expect
    assert any(k[0] == "rcr" for k in d.bound if isinstance(k, tuple))
    # the default choice is bound separately and still the paper's
    ld.forward_dynamics(model, q, v, tau, method="rcr", data=d)
    assert R.plan_for(model, d).blocks[0][3] == (0, 1)


def test_chosen_independent_coordinates_on_coupled_loops():
    """delta and three_rrr (loops sharing bodies, delta's merged): every choice whose
    dependent columns of J are regular is exact."""
    for name in ("delta", "three_rrr"):
        model = ld.examples.get(name)
        q, v, tau = consistent_state(model, np.random.default_rng(3))
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        _, J, _ = ld.constraints(model, q)
        rng = np.random.default_rng(0)
        done = 0
        while done < 6:
            ind = np.sort(rng.choice(model.nv, model.nv - a.rank, replace=False))
            dep = np.setdiff1d(np.arange(model.nv), ind)
            if np.linalg.cond(J[:, dep]) > 1e6:
                continue
            r = ld.forward_dynamics(model, q, v, tau, method="rcr", independent=ind,
                                    data=model.create_data())  # fmt: skip
            assert r.method == "rcr" and rel(r.qdd, a.qdd) < 1e-10, (name, ind)
            done += 1


def test_an_ill_conditioned_chosen_set_is_reselected():
    """stewart (its five platform closures one merged block): this independent set has
    cond(Y1) = 1.7e4 though its pivot ratio is 0.011; its X would carry cond² into the
    reduced mass matrix (q̈ was off by 5e-8) and the condition check re-selects: exact."""
    model = ld.examples.stewart()
    q, v, tau = consistent_state(model, np.random.default_rng(1))
    a = ld.forward_dynamics(model, q, v, tau, method="augmented")
    ind = [0, 1, 2, 11, 16, 19]
    d = model.create_data()
    r = ld.forward_dynamics(model, q, v, tau, method="rcr", independent=ind, data=d)
    assert r.method == "rcr" and rel(r.qdd, a.qdd) < 1e-10
    _, J, _ = ld.constraints(model, q)
    dep = R.plan_for(model, d, ind).dependent(0)
    assert sorted(dep) != sorted(set(range(model.nv)) - set(ind))  # chosen again
    assert np.linalg.cond(J[:, list(dep)]) < R.COND_MAX


def test_a_singular_chosen_coordinate_is_reselected():
    model = _spinning_loop()
    rng = np.random.default_rng(5)
    q = model.neutral()
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    spin = int(model.topo[model.body_names.index("s"), 3])
    ind = [c for c in range(model.nv) if c != spin][:3]  # the spin dependent: Y1 singular
    d = model.create_data()
    r = ld.forward_dynamics(model, q, v, tau, method="rcr", independent=ind, data=d)
    assert spin not in R.plan_for(model, d, ind).dependent(0)
    a = ld.forward_dynamics(model, q, v, tau, method="augmented")
    assert r.method == "rcr" and rel(r.qdd, a.qdd) < 1e-10


def test_invalid_independent_choices_are_named_errors():
    model = ld.examples.excavator()
    q, v = model.q0, np.zeros(model.nv)
    # j1, j2 independent leave loop j15 one dependent coordinate (j6) for its 2 rows
    with pytest.raises(ld.SingularityError, match=r"RCR loop j15: .*j1, j2, j6.* leave j6 "
                       r"dependent, 1 for its 2 rows .*condition number inf"):  # fmt: skip
        ld.forward_dynamics(model, q, v, method="rcr", independent=["j1", "j2", "j3"])
    with pytest.raises(ValueError, match=r"3 independent coordinates are needed"):
        ld.forward_dynamics(model, q, v, method="rcr", independent=["j1"])
    with pytest.raises(ValueError, match=r"unknown joint 'nope'"):
        ld.forward_dynamics(model, q, v, method="rcr", independent=["nope"])
    with pytest.raises(ValueError, match=r"index 11 out of range"):
        ld.forward_dynamics(model, q, v, method="rcr", independent=[0, 1, 11])
    with pytest.raises(ValueError, match=r"method='rcr', not 'augmented'"):
        ld.forward_dynamics(model, q, v, method="augmented", independent=["j1"])


def test_the_runner_raises_the_loop_specific_error():
    """At the collinear four-bar every method fails (γ is not in J's range): the runner's
    SingularityError for method="rcr" is rcr.explain's, naming the loop, its joints and
    cond(Y1), then the dense diagnosis."""
    model = flat_four_bar(0.5)
    msg = r"RCR loop loop: .*rocker, crank, coupler \(condition number of Y1 .*fallback failed"
    with pytest.raises(ld.SingularityError, match=msg):
        ld.forward_dynamics(model, np.zeros(3), np.array([1.0, -1.5, 0.0]), np.zeros(3),
                            method="rcr", data=model.create_data())  # fmt: skip


def test_simulate_with_chosen_independent_coordinates():
    """ld.simulate(method="rcr", independent=joint names): the partitioning integrates
    them and RCR uses them; the motion is the default run's."""
    model = ld.examples.five_bar()
    kw = dict(t_end=0.5, method="rcr", stabilization="partitioning", t_eval=6, rtol=1e-10,
              atol=1e-10, repartition=False)  # fmt: skip
    a = ld.simulate(model, **kw)  # the actuated proximal joints independent
    b = ld.simulate(model, independent=["leg1_distal", "leg2_distal"], **kw)
    assert a.completed and b.completed and b.method == "rcr"
    assert np.abs(a.q - b.q).max() < 1e-7
    assert np.nanmax(b.residual_position) < 1e-10
    with pytest.raises(ValueError, match="unknown joint"):
        ld.simulate(model, independent=["nope"], **kw)


def test_loops_that_cannot_be_solved_one_by_one_are_merged():
    """delta: its two closures on the platform leave the second loop 4 rows on 3
    coordinates not fixed by the first, so they form one block: still exact."""
    model = ld.examples.delta()
    d = model.create_data()
    q, v, tau = consistent_state(model, np.random.default_rng(2))
    r = rcr(model, q, v, tau, data=d)
    a = ld.forward_dynamics(model, q, v, tau, method="augmented")
    assert rel(r.qdd, a.qdd) < 1e-10
    plan = R.plan_for(model, d)
    assert any(len(b[1]) == 2 for b in plan.blocks)


def test_more_rows_than_coordinates_is_a_model_error():
    model = ld.examples.four_bar()
    d = model.create_data()
    with pytest.raises(ld.ModelError, match=r"rows on .* coordinates.*embedding"):
        loops = [dict(closures=[(0, [0, 1, 2], [])], rows=[0, 1, 2], path=[0, 1])]
        R.RcrPlan._schedule(model, loops, 3, False)
    del d


def test_tree_model_is_aba():
    model = ld.examples.serial_arm()
    q = model.neutral()
    v = np.ones(model.nv)
    tau = np.zeros(model.nv)
    r = ld.forward_dynamics(model, q, v, tau, method="rcr")
    assert rel(r.qdd, ld.aba(model, q, v, tau)) < 1e-12


# --------------------------------------------------------------------------- random
HYPOTHESIS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)


def _exact_or_named(mech):
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    try:
        res = ld.forward_dynamics(
            mech.model, mech.q, mech.v, mech.tau, method="rcr", data=mech.model.create_data()
        )
    except ld.LoopdynError:
        return "error"
    if not o.consistent:
        pytest.fail(f"an answer where J q̈ = γ has no solution\n{mech.code()}")
    err = mx.relative_error(res.qdd, o)
    assert err <= mx.REL_TOL, f"rcr error {err:.3g}\n{mech.code()}"
    return res.method


@given(mx.mechanisms(max_bodies=8, max_closures=3))
@HYPOTHESIS
def test_rcr_is_exact_or_a_loopdyn_error_on_hypothesis_mechanisms(mech):
    _exact_or_named(mech)


def test_rcr_is_exact_or_a_loopdyn_error_on_seeded_mechanisms():
    used = []
    for i in range(30):
        used.append(_exact_or_named(mx.random_mechanism((2024, i))))
    assert used.count("rcr") >= 20, used  # mostly RCR itself, not the fallback


# --------------------------------------------------------------------------- simulation
def test_simulation_in_independent_coordinates_keeps_the_four_bar_closed():
    """100 s of the four-bar (1000 s in examples/papers/rcr_paper.py, docs/rcr.md): partitioning
    integrates the independent coordinate only, so max |Φ| stays at the Newton
    tolerance instead of drifting."""
    model = ld.examples.four_bar()
    traj = ld.simulate(
        model, t_end=100.0, method="rcr", stabilization="partitioning", rtol=1e-9, atol=1e-9,
        t_eval=201,
    )  # fmt: skip
    assert traj.completed and traj.method == "rcr"
    assert np.nanmax(traj.residual_position) < 1e-10
    assert np.nanmax(traj.residual_velocity) < 1e-9


def test_fixed_step_rk4_run_of_the_paper_keeps_the_four_bar_closed():
    """Figs. 5–6's setting over 50 s (1000 s: examples/papers/rcr_paper.py, docs/rcr.md): RK4 at
    0.01 s, no stabilisation term, RCR integrating the independent coordinate (the loop
    embedded at velocity level, dependent positions by Newton from the last step): max
    |Φ| stays at the Newton tolerance (1e-12) and J v at rounding; the energy of this
    conservative run stays within 2e-4 relative (measured 8.6e-5, mostly in the steps
    where the partitioning changes the independent coordinate)."""
    model = ld.examples.four_bar()
    traj = ld.simulate(
        model, t_end=50.0, method="rcr", integrator="RK4", dt=0.01,
        stabilization="partitioning", t_eval=501,
    )  # fmt: skip
    assert traj.completed and traj.method == "rcr"
    assert np.nanmax(traj.residual_position) < 1e-11
    assert np.nanmax(traj.residual_velocity) < 1e-11
    assert np.abs(traj.energy_drift).max() < 2e-4 * np.abs(traj.energy).max()


@pytest.mark.parametrize("name", ACCEPTED)
def test_the_catalog_needs_no_refinement(name):
    """The refinement (``R.refine``: a second recursion per step, for spread articulated
    pivots or a Y1 ill-conditioned whatever the choice) is not paid on the catalog, and
    the answer of one pass is already the oracle's (test above)."""
    from loopdyn.methods.common import DIAG_REFINED

    model = ld.examples.get(name, **ACCEPTED[name])
    d = model.create_data()
    rng = np.random.default_rng(7)
    for _ in range(4):
        q, v, tau = consistent_state(model, rng)
        rcr(model, q, v, tau, data=d)
        assert d.diag[DIAG_REFINED] == 0, name
