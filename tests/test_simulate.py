"""ld.simulate: integrators, constraint stabilisation, trajectories, failures, and the
Saha & Schiehlen experiments at short horizons (the full runs: examples/saha_schiehlen.py)."""

import itertools
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from loopdyn.analysis.motion import PrescribedMotion, consistent_acceleration, cycloidal
from loopdyn.methods import dynamics
from loopdyn.sim.charts import chart_rate_kernel
from loopdyn.sim.integrators import INTEGRATORS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from saha_schiehlen import five_bar_lower, singular_crossings

DEG = np.pi / 180.0


@cache
def four_bar_90():
    """The four-bar released from θ1 = 90° at rest (Saha & Schiehlen Fig. 7)."""
    return ld.examples.four_bar(theta1=90 * DEG)


@cache
def spatial_four_bar():
    """A spatial four-bar: crank (revolute z), coupler on a spherical joint (quaternion),
    rocker (revolute z), closed by a ball joint; 2 DOF (the coupler may spin)."""
    b = ld.ModelBuilder("spatial_four_bar", gravity=(0.0, -9.81, 0.0))
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **ld.examples.rod(1.5, 0.3))
    b.add_body(
        "coupler", "crank", ld.Spherical(), xyz=(0.3, 0, 0), mass=5.0, com=(0.5, 0, 0),
        inertia=np.diag([0.05, 5 / 12, 5 / 12]),
    )  # fmt: skip
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1.0, 0, 0), **ld.examples.rod(3.0, 0.6))
    b.add_frame("coupler_tip", "coupler", xyz=(1.0, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("tip", "coupler_tip", "rocker_tip", "ball")
    model = b.build()
    t1, t2, t3 = ld.examples.four_bar(theta1=60 * DEG).q0
    guess = [t1, np.cos(t2 / 2), 0.0, 0.0, np.sin(t2 / 2), t3]
    model.q0 = ld.assemble(model, guess)
    return model


def quaternion_norms(model, Q):
    out = []
    for i, jt in enumerate(model.joint_types):
        s = model.q_slice(i)
        if jt == "spherical":
            out.append(np.linalg.norm(Q[:, s], axis=1))
        elif jt == "free":
            out.append(np.linalg.norm(Q[:, s.start + 3 : s.stop], axis=1))
    return np.array(out)


# ------------------------------------------------------------------ the chart
@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.5])
def test_chart_rate_is_the_inverse_right_jacobian(scale):
    """δ̇ = J_r(δ)⁻¹ v: moving δ along δ̇ moves q with body velocity v (finite differences)."""
    model = ld.examples.random_tree(8, 0)
    assert {"spherical", "free"} <= set(model.joint_types)
    rng = np.random.default_rng(3)
    qa = model.random_configuration(rng)
    d = rng.normal(size=model.nv) * scale
    v = rng.normal(size=model.nv)
    dd = np.empty(model.nv)
    chart_rate_kernel(model.topo, d, v, dd)
    eps = 1e-6
    q_mid = ld.integrate(model, qa, d)
    q_plus = ld.integrate(model, qa, d + eps * dd)
    q_minus = ld.integrate(model, qa, d - eps * dd)
    # body velocity of the central difference, expressed at q_mid (angular: log of R_mid⁻¹R±)
    for i, jt in enumerate(model.joint_types):
        sv, sq = model.v_slice(i), model.q_slice(i)
        if jt not in ("spherical", "free"):
            np.testing.assert_allclose(dd[sv], v[sv])
            continue
        k = sq.start if jt == "spherical" else sq.start + 3
        Rm, Rp, Rn = (_rot(x[k : k + 4]) for x in (q_mid, q_plus, q_minus))
        w = (_log(Rm.T @ Rp) - _log(Rm.T @ Rn)) / (2 * eps)
        np.testing.assert_allclose(w, v[sv][:3], atol=1e-7)
        if jt == "free":
            u = Rm.T @ (q_plus[sq.start : sq.start + 3] - q_minus[sq.start : sq.start + 3])
            np.testing.assert_allclose(u / (2 * eps), v[sv][3:], atol=1e-7)


def _rot(qu):
    w, x, y, z = np.asarray(qu) / np.linalg.norm(qu)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _log(R):
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(R).as_rotvec()


def test_quaternions_stay_unit_and_energy_is_conserved_on_a_tree():
    model = ld.examples.random_tree(8, 0)
    assert {"spherical", "free"} <= set(model.joint_types)
    rng = np.random.default_rng(0)
    v0 = rng.normal(size=model.nv)
    traj = ld.simulate(model, model.q0, v0, 0.5, rtol=1e-10, atol=1e-10, t_eval=11)
    assert traj.completed and traj.q.shape == (11, model.nq)
    norms = quaternion_norms(model, traj.q)
    assert norms.size and np.abs(norms - 1.0).max() < 1e-14
    assert np.abs(traj.energy_drift).max() < 1e-7 * max(1.0, abs(traj.energy[0]))


# ------------------------------------------------------------- stabilisation
@cache
def drift_runs():
    """Four-bar free fall, RK4 with h = 0.01 s for 2 s, every stabilisation."""
    return {
        s: ld.simulate(
            four_bar_90(), t_end=2.0, integrator="RK4", dt=0.01, stabilization=s, t_eval=201
        )
        for s in ld.simulate.__globals__["STABILIZATIONS"]
    }


def test_none_drifts_quadratically():
    r = drift_runs()["none"].residual_position
    # acceleration-level enforcement only: the position residual grows like t²
    assert r[200] > 1e-6
    assert r[200] / r[100] > 2.0
    assert drift_runs()["none"].stats["projections"] == 0


def test_baumgarte_bounds_the_drift():
    r = drift_runs()["baumgarte"].residual_position
    assert r.max() < 5e-6
    assert r[200] < 0.05 * drift_runs()["none"].residual_position[200]


@pytest.mark.parametrize("mode", ["projection", "partitioning"])
def test_projection_and_partitioning_stay_on_the_manifolds(mode):
    traj = drift_runs()[mode]
    assert traj.residual_position.max() < 1e-11
    assert traj.residual_velocity.max() < 1e-11
    # the same motion as the unstabilised run to the accuracy of RK4 at h = 0.01 s
    np.testing.assert_allclose(traj.q, drift_runs()["none"].q, atol=1e-3)


@pytest.mark.parametrize("mode", ["none", "baumgarte", "projection", "partitioning"])
def test_a_closure_of_rank_0_simulates_as_the_tree(mode):
    """A weld closure between a body and its own welded tip: its rows are identically
    zero (rank 0).  Every stabilisation integrates the tree's motion; projection (the
    default) raised numpy's "zero-size array" on the empty independent rows and
    partitioning a ZeroDivisionError on the empty dependent block; the compiled loop
    (its monitor's svd, projection and Baumgarte on no rows) handed every run back."""
    b = ld.ModelBuilder("rank0")
    b.add_body("arm", "ground", ld.Revolute("y"), mass=1.0, com=(0.5, 0, 0),
               inertia=(0.01, 0.1, 0.1))  # fmt: skip
    b.add_body("tip", "arm", ld.Fixed(), xyz=(1, 0, 0), mass=0.5, inertia=(0.01, 0.01, 0.01))
    b.add_frame("arm_end", "arm", xyz=(1, 0, 0))
    b.add_frame("tip_origin", "tip")
    tree = b.build()
    b.add_closure("weld", "arm_end", "tip_origin", "weld")
    model = b.build()
    q, v = np.array([0.3]), np.array([0.5])
    kw = dict(t_end=0.5, t_eval=6, rtol=1e-10, atol=1e-10)
    tr = ld.simulate(model, q, v, stabilization=mode, **kw)
    ref = ld.simulate(tree, q, v, **kw)
    assert tr.completed, tr.message
    assert tr.stats["compiled"]  # the compiled loop too (its svd refused the empty rows)
    np.testing.assert_allclose(tr.q, ref.q, rtol=0, atol=1e-8)


def _rssr(swapped):
    """A spatial RSSR (crank, coupler on a spherical joint, rocker) closed by a ball
    closure, and with ``swapped`` the same closure again with its frames swapped (rank 3
    of 6 rows)."""
    b = ld.ModelBuilder("rssr")
    inertia = (0.01, 0.02, 0.02)
    b.add_body("crank", "ground", ld.Revolute("z"), mass=1.0, com=(0.15, 0, 0),
               inertia=inertia)  # fmt: skip
    b.add_body("coupler", "crank", ld.Spherical(), xyz=(0.3, 0, 0), mass=0.5,
               com=(0.5, 0, 0), inertia=inertia)  # fmt: skip
    b.add_body("rocker", "ground", ld.Revolute("y"), xyz=(0.9, 0.4, 0.1), mass=0.8,
               com=(0, 0, 0.3), inertia=inertia)  # fmt: skip
    b.add_frame("A", "coupler", xyz=(1.0, 0, 0))
    b.add_frame("B", "rocker", xyz=(0, 0, 0.6))
    b.add_closure("c0", "A", "B", "ball")
    if swapped:
        b.add_closure("c1", "B", "A", "ball")
    return b.build()


@pytest.mark.parametrize(
    "kw, atol",
    [
        (dict(stabilization="projection"), 1e-9),
        (dict(stabilization="baumgarte"), 1e-9),
        (dict(stabilization="projection", integrator="RK4", dt=0.01), 1e-12),
        (dict(stabilization="projection", rtol=1e-4, atol=1e-4), 1e-3),
        (dict(stabilization="partitioning"), 1e-8),
    ],
)
def test_a_swapped_duplicate_closure_simulates_as_the_model_without_it(kw, atol):
    """A spatial RSSR closed by a ball closure and the same closure with its frames
    swapped (rank 3 of 6 rows).  Off the constraint manifold, at the integrator's stage
    points, the duplicate's rows depend on the kept ones only to first order in |Φ| and
    |J v|; checked at the on-manifold tolerance they were "violated" and every step
    raised SimulationSingularityError at t = 0 (so did 4 of 300 random mechanisms, 3 with
    swapped closures).  The projection chose its rows at the first projected state, off
    the manifold: four of the rank-3 set, whose near-singular J Jᵀ threw v off by 1e-8 a
    step (RK4: energy 4.882 -> 4.833 J in 2 s; the model without the duplicate keeps it
    to 1e-9).  At rtol = 1e-4 a trial step put a stage at |Φ| = 1.2, singular there: the
    step is retried shorter.  The motion is the one without the duplicate."""

    single, double = _rssr(False), _rssr(True)
    q = ld.assemble(single, single.q0)
    v = ld.complete_velocity(single, q, [2.0, 0, 0, 0, 0])
    assert ld.constraint_rank(double, q).rank == 3
    kw = dict(t_end=2.0, t_eval=11, **kw)
    tr = ld.simulate(double, q, v, **kw)
    ref = ld.simulate(single, q, v, **kw)
    assert tr.completed
    np.testing.assert_allclose(tr.q, ref.q, rtol=0, atol=atol)
    assert np.abs(tr.energy - ref.energy).max() <= atol * abs(ref.energy[0])


def test_the_mobility_monitor_is_not_fooled_by_a_degenerate_choice_of_redundant_rows():
    """The monitor watched the independent rows chosen at the start.  With redundant
    closures those can be a mix (a ball closure's rows in frame A, its swapped
    duplicate's in frame B) that loses rank where J does not, where the two frames align:
    det [J_r; Nᵀ] changed sign and the run stopped with SimulationSingularityError on a
    motion whose J kept its conditioning (random mechanism (3, 106) at t = 1.745 s, the
    oracle's condition 6e7 all along).  Here the rows x, y of c0 and z of c1 of the RSSR
    with a swapped duplicate, along the motion of the RSSR without it (the same motion):
    their σ_3/σ_1 falls from 0.25 to 2.5e-3 near t = 0.47 s while J's stays above 0.09.
    The monitor now re-selects the rows where the chosen ones degenerate."""
    from loopdyn.sim.stabilization import System

    single, double = _rssr(False), _rssr(True)
    q = ld.assemble(single, single.q0)
    v = ld.complete_velocity(single, q, [5.0, 0, 0, 0, 0])
    tr = ld.simulate(single, q, v, t_end=1.0, t_eval=201, rtol=1e-10, atol=1e-10)
    sy = System(double, "augmented", None, "projection", (10.0, 10.0), 1e-12,
                double.create_data(), None)  # fmt: skip
    sy.mobility_start(tr.q[0])
    sy.monitor_rows = np.array([0, 1, 5])  # instead of constraint_rank's choice, c0's rows
    sy._frame = sy._mobility_frame(tr.q[0], None)
    for k in range(1, tr.t.size):
        sy.mobility_crossed(tr.q[k], tr.t[k - 1], tr.t[k])


def test_partition_and_constraint_rank_agree_off_the_manifold():
    """ld.partition took its rank with a tolerance of its own (10 max(m, nv) ε on its
    QR's diagonal, against ld.constraint_rank's 1e-12 σ_max): a hair off the manifold,
    where a swapped duplicate closure's rows are independent to the order of |Φ|, it
    found more dependent coordinates than there are independent rows, and a simulation's
    re-partitioning raised ValueError (random mechanism (5, 279) at |Φ| 3.6e-13)."""
    model = _rssr(swapped=True)
    q0 = ld.assemble(model, model.q0)
    rng = np.random.default_rng(3)
    for off in (0.0, 1e-13, 1e-12, 1e-11):
        q = q0.copy()
        q[[0, 5]] += off * rng.normal(size=2)  # the two hinges: the quaternion stays unit
        rank = ld.constraint_rank(model, q).rank
        assert ld.partition(model, q).dependent.size == rank, off
        assert rank == 3 or off >= 1e-12, off  # above 1e-12 σ_max the rows are independent


def test_repartitioning_sees_a_one_by_one_block_that_shrinks():
    """Random mechanism (5, 297): one planar closure row, so J_d is 1×1 and its cond(J_d)
    is 1 whatever its size.  The dependent coordinate lost its hold on the row, nothing
    triggered a re-partition, the velocities grew to 2e10 in 0.4 ms and DOP853 failed at
    t = 0.096 s.  κ(J_d) = σ_max(J_r)/σ_min(J_d) re-partitions at 0.088 s; the motion is
    the projection's."""
    import mechanisms as mx
    from loopdyn.sim.stabilization import partition_condition

    J = np.array([[1e-6, 1.0, 0.5]])
    rows, dep = np.array([0]), np.array([0])
    assert np.linalg.cond(J[np.ix_(rows, dep)]) == 1.0
    assert partition_condition(J, rows, dep) > 1e6
    mech = mx.random_mechanism((5, 297))
    kw = dict(t_end=0.15, t_eval=4, rtol=1e-10, atol=1e-10)
    tr = ld.simulate(mech.model, mech.q, mech.v, stabilization="partitioning", **kw)
    ref = ld.simulate(mech.model, mech.q, mech.v, **kw)
    assert tr.completed and tr.stats["repartitions"]
    np.testing.assert_allclose(tr.q, ref.q, rtol=0, atol=1e-7)
    assert np.abs(tr.energy_drift).max() <= 1e-8 * abs(tr.energy[0])


def test_baumgarte_gains_are_used():
    def run(gains):
        return ld.simulate(
            four_bar_90(), t_end=2.0, integrator="RK4", dt=0.01, stabilization="baumgarte",
            baumgarte=gains, t_eval=201,
        ).residual_position  # fmt: skip

    zero = run((0.0, 0.0))
    np.testing.assert_allclose(zero, drift_runs()["none"].residual_position, rtol=1e-6, atol=1e-15)
    assert run((10.0, 10.0))[100:].mean() < 0.1 * zero[100:].mean()


def test_projection_with_quaternions_in_the_loop():
    model = spatial_four_bar()
    rng = np.random.default_rng(1)
    v0 = ld.complete_velocity(model, model.q0, rng.normal(size=model.nv), fixed=[])
    for mode in ("projection", "partitioning"):
        traj = ld.simulate(
            model, model.q0, v0, 0.5, stabilization=mode, rtol=1e-10, atol=1e-10, t_eval=26
        )
        assert traj.completed
        assert traj.max_residual < 1e-10
        assert np.abs(quaternion_norms(model, traj.q) - 1.0).max() < 1e-14
        assert np.abs(traj.energy_drift).max() < 1e-7 * abs(traj.energy[0])


def test_partitioning_reselects_and_passes_the_five_bar_singularity():
    """The five-bar falls through configurations where (θ1⁽¹⁾, θ1⁽²⁾) cannot be the
    independent coordinates: automatic re-partitioning passes them."""
    model, q0 = five_bar_lower()
    traj = ld.simulate(
        model, q0, None, 1.6, stabilization="partitioning", independent=model.actuated,
        rtol=1e-10, atol=1e-10, t_eval=161,
    )  # fmt: skip
    assert traj.completed
    assert traj.stats["repartitions"], "the partition must change near t = 1.33 s"
    crossings = singular_crossings(model, traj)
    assert crossings and 1.25 < crossings[0] < 1.45
    assert traj.max_residual < 1e-10
    assert np.abs(traj.energy_drift).max() < 1e-6 * abs(traj.energy[0])
    # the full-coordinate KKT method goes through as well, on the same path
    aug = ld.simulate(model, q0, None, 1.6, rtol=1e-10, atol=1e-10, t_eval=161)
    assert aug.completed
    np.testing.assert_allclose(aug.q, traj.q, atol=1e-5)


# ------------------------------------------------------- error, partial result
def test_fixed_partition_stops_at_the_singularity_with_the_partial_trajectory():
    """The paper's minimal coordinates (θ1⁽¹⁾, θ1⁽²⁾) hit a singular J_d near 1.33 s
    (Saha & Schiehlen: "after about 1.4 sec ... the program stopped")."""
    model, q0 = five_bar_lower()
    with pytest.raises(ld.SingularityError) as info:
        ld.simulate(
            model, q0, None, 3.0, stabilization="partitioning", independent=model.actuated,
            repartition=False, rtol=1e-10, atol=1e-10, t_eval=301,
        )  # fmt: skip
    e = info.value
    assert isinstance(e, ld.SimulationError) and isinstance(e, ld.SimulationSingularityError)
    assert 1.25 < e.t < 1.45
    assert e.condition > 1e5
    assert e.q.shape == (model.nq,) and e.v.shape == (model.nv,)
    traj = e.trajectory
    assert isinstance(traj, ld.Trajectory) and not traj.completed
    assert traj.t[-1] == e.t and np.array_equal(traj.q[-1], e.q)
    assert traj.t.size > 100 and np.all(np.diff(traj.t) > 0)
    assert traj.residual_position.max() < 1e-10
    # nothing past the singular point is recorded (the last state, at cond(J_d) > 1e5,
    # has an ill-conditioned velocity: the error's condition number says so)
    assert np.abs(traj.energy_drift[:-1]).max() < 1e-6 * abs(traj.energy[0])
    assert "stopped at t" in str(e) and "condition number" in str(e)


def test_non_finite_controller_raises_simulation_error_with_partial_trajectory():
    def controller(t, q, v):
        return np.nan if t > 0.3 else 0.0

    with pytest.raises(ld.SimulationError) as info:
        ld.simulate(four_bar_90(), t_end=1.0, tau=controller, t_eval=101)
    e = info.value
    assert not isinstance(e, ld.SingularityError)
    assert 0.0 < e.t <= 0.31
    assert e.trajectory.t[-1] == e.t and not e.trajectory.completed


# ----------------------------------------------------------- energy, methods
@pytest.mark.parametrize("method", dynamics.METHODS)
def test_free_motion_conserves_energy_with_every_method(method):
    minimal = method in dynamics.MINIMAL_METHODS
    mode = "partitioning" if minimal else "projection"
    traj = ld.simulate(four_bar_90(), t_end=1.5, method=method, rtol=1e-10, atol=1e-10, t_eval=16,
                       stabilization=mode)  # fmt: skip
    assert traj.method == method and traj.completed
    assert np.abs(traj.energy_drift).max() < 1e-8 * abs(traj.energy[0])
    assert traj.max_residual < 1e-10


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_every_integrator(integrator):
    model = four_bar_90()
    ref = ld.simulate(model, t_end=0.5, rtol=1e-12, atol=1e-12, t_eval=6)
    kw = dict(dt=1e-3) if integrator == "RK4" else dict(rtol=1e-9, atol=1e-9)
    traj = ld.simulate(model, t_end=0.5, integrator=integrator, t_eval=6, **kw)
    assert traj.integrator == integrator and traj.completed
    np.testing.assert_allclose(traj.t, ref.t)
    tol = 1e-6 if integrator in ("Radau", "BDF", "LSODA") else 1e-8
    np.testing.assert_allclose(traj.q, ref.q, atol=tol)
    # LSODA restarts on a change of state, so it is projected only beyond 100 atol
    assert traj.max_residual < (100 * 1e-9 if integrator == "LSODA" else 1e-10)


def test_output_times_and_progress():
    seen = []
    t_eval = [0.0, 0.013, 0.2, 0.35]
    traj = ld.simulate(
        four_bar_90(), t_end=0.35, integrator="RK4", dt=0.01, t_eval=t_eval,
        progress=lambda t, t_end: seen.append((t, t_end)),
    )  # fmt: skip
    np.testing.assert_array_equal(traj.t, t_eval)
    assert seen and all(b[0] > a[0] for a, b in itertools.pairwise(seen))
    assert seen[-1] == (0.35, 0.35)
    # steps land on output times: 0.013 is reached exactly
    assert traj.stats["steps"] >= 36
    with pytest.raises(ValueError, match="t_eval"):
        ld.simulate(four_bar_90(), t_end=1.0, t_eval=[0.5, 0.2])
    with pytest.raises(ValueError, match="unknown method"):
        ld.simulate(four_bar_90(), t_end=1.0, method="nope")
    with pytest.raises(ValueError, match="stabilization"):
        ld.simulate(four_bar_90(), t_end=1.0, stabilization="nope")
    with pytest.raises(ValueError, match="RK4"):
        ld.simulate(four_bar_90(), t_end=1.0, dt=0.01)


def test_initial_state_is_made_consistent():
    model = four_bar_90()
    q0 = np.array(model.q0) + np.array([0.0, 0.01, -0.01])
    traj = ld.simulate(model, q0, [1.0, 0.0, 0.0], 0.1, t_eval=2)
    assert traj.q[0, 0] == model.q0[0] and traj.residual_position[0] < 1e-12
    assert traj.v[0, 0] == 1.0 and traj.residual_velocity[0] < 1e-12


# ---------------------------------------------------------------- joint forces
def test_constant_tau_forms():
    model = four_bar_90()
    a = ld.simulate(model, t_end=0.2, tau=2.0, t_eval=3)
    b = ld.simulate(model, t_end=0.2, tau=[2.0], t_eval=3)
    c = ld.simulate(model, t_end=0.2, tau=[2.0, 0.0, 0.0], t_eval=3)
    np.testing.assert_allclose(a.q, b.q)
    np.testing.assert_allclose(a.q, c.q)
    np.testing.assert_array_equal(a.tau[:, 0], 2.0)
    with pytest.raises(ValueError, match="tau"):
        ld.simulate(model, t_end=0.2, tau=[1.0, 2.0])
    with pytest.raises(ValueError, match="controller"):
        ld.simulate(model, t_end=0.2, tau=lambda t, q, v: [1.0, 2.0])
    with pytest.raises(ld.SimulationError, match="non-finite") as info:
        ld.simulate(model, t_end=0.2, tau=lambda t, q, v: np.nan)
    assert info.value.t == 0.0 and len(info.value.trajectory) == 1


def test_inverse_dynamics_torque_fig6_and_energy_balance():
    """Fig. 6: τ1 along the cycloidal motion; its work equals the energy change."""
    model = ld.examples.four_bar()
    pm = PrescribedMotion(model, lambda t: cycloidal(t, 20.0, 30 * DEG, 90 * DEG))
    ts = np.linspace(0.0, 20.0, 401)
    power, energy, tau1 = [], [], []
    for t in ts:
        q, v, qdd = pm.state(t)
        _, J, gamma = ld.constraints(model, q, v)
        assert np.abs(J @ qdd - gamma).max() < 1e-10 and np.abs(J @ v).max() < 1e-12
        u = ld.inverse_dynamics(model, q, v, qdd).tau
        tau1.append(u[0])
        power.append(u @ v)
        energy.append(ld.total_energy(model, q, v))
    from scipy.integrate import simpson

    assert simpson(power, x=ts) == pytest.approx(energy[-1] - energy[0], rel=1e-6)
    # at rest at both ends the torque balances gravity: τ1 = dV/dθ1 along the loop
    assert tau1[0] == pytest.approx(8.634, abs=2e-3)
    assert tau1[-1] == pytest.approx(-0.875, abs=2e-3)


def test_computed_torque_controller_tracks_eq37():
    """Eq. (37) with λ = 1 as a controller callable: the desired motion is followed."""
    model = ld.examples.four_bar()
    motion = lambda t: cycloidal(t, 20.0, 30 * DEG, 90 * DEG)  # noqa: E731
    calls = []
    ctl = PrescribedMotion(model, motion).computed_torque(lam=1.0)

    def controller(t, q, v):
        calls.append(t)
        return ctl(t, q, v)

    traj = ld.simulate(model, t_end=8.0, tau=controller, t_eval=41)
    desired = np.array([motion(t)[0] for t in traj.t])
    assert np.abs(traj.q[:, 0] - desired).max() < 1e-7
    assert calls and traj.tau[:, 1:].max() == 0.0 and traj.tau[:, 0].max() > 8.0
    # open loop the same torque is unstable (the frozen-time potential has a maximum
    # for θ1 > 32°): started 1e-3 rad off, the error grows instead of decaying
    ff = PrescribedMotion(model, motion).feedforward()
    q0 = ld.assemble(model, np.array(model.q0) + np.array([1e-3, 0.0, 0.0]))
    open_loop = ld.simulate(model, q0, None, 8.0, tau=ff, t_eval=41)
    err = np.abs(open_loop.q[:, 0] - desired)
    assert err[-1] > 10 * err[0]
    closed = ld.simulate(model, q0, None, 8.0, tau=ctl, t_eval=41)
    assert np.abs(closed.q[-1, 0] - desired[-1]) < 1e-5


def test_consistent_acceleration():
    model = ld.examples.five_bar()
    v = ld.complete_velocity(model, model.q0, [0.3, 0.0, -0.2, 0.0])
    qdd = consistent_acceleration(model, model.q0, v, [1.0, 2.0])
    _, J, gamma = ld.constraints(model, model.q0, v)
    np.testing.assert_allclose(J @ qdd, gamma, atol=1e-12)
    np.testing.assert_allclose(qdd[model.actuated], [1.0, 2.0])


# --------------------------------------------------------------- the result
def test_trajectory_save_load_csv_round_trip(tmp_path):
    traj = ld.simulate(four_bar_90(), t_end=0.3, t_eval=31, tau=lambda t, q, v: [0.5 * t])
    path = traj.save(tmp_path / "traj.npz")
    back = ld.Trajectory.load(path)
    for name in ("t", "q", "v", "qdd", "lam", "tau", "residual_position", "energy", "condition"):
        np.testing.assert_array_equal(getattr(back, name), getattr(traj, name))
    assert back.summary() == traj.summary()
    assert back.stats == traj.stats and back.model is None
    assert back.resolve_model().name == "four_bar"
    csv = traj.to_csv(tmp_path / "traj.csv")
    head = csv.read_text().splitlines()[0].split(",")
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert table.shape == (31, len(head))
    assert head[:4] == ["t", "q0", "q1", "q2"] and "energy_drift" in head
    np.testing.assert_array_equal(table[:, head.index("q1")], traj.q[:, 1])
    np.testing.assert_array_equal(table[:, head.index("tau0")], traj.tau[:, 0])
    # q̈ and λ satisfy the equations of motion at the outputs
    k = 10
    tau_k = ld.inverse_dynamics(four_bar_90(), traj.q[k], traj.v[k], traj.qdd[k]).tau
    assert tau_k[0] == pytest.approx(traj.tau[k, 0], abs=1e-8)


def test_plot_and_animate(tmp_path):
    traj = ld.simulate(four_bar_90(), t_end=0.4, t_eval=41)
    fig = traj.plot(tmp_path / "traj.png", what=("q", "v", "tau", "residuals", "energy"))
    assert len(fig.axes) == 5 and (tmp_path / "traj.png").stat().st_size > 10_000
    gif = traj.animate(tmp_path / "traj.gif", fps=20, trace="coupler_tip")
    from PIL import Image

    with Image.open(gif) as im:
        assert im.n_frames == 9
    spatial = ld.simulate(ld.examples.spatial_ladder(L=2), t_end=0.2, t_eval=5)
    spatial.animate(tmp_path / "ladder.gif", fps=10)
    assert (tmp_path / "ladder.gif").stat().st_size > 1000
    with pytest.raises(ValueError, match=r"gif or \.mp4"):
        traj.animate(tmp_path / "traj.avi")
    # strobe stills: n instants drawn over each other (segments per instant), planar
    # and spatial
    fig = traj.strobe(tmp_path / "strobe.png", n=4, trace="coupler_tip")
    assert (tmp_path / "strobe.png").stat().st_size > 10_000
    n_segments = len(ld.viz.plotting.skeleton(traj.model)[0][0]) + 1
    assert len(fig.axes[0].lines) >= 4 * n_segments
    spatial.strobe(tmp_path / "ladder.png", n=3)
    with pytest.raises(ValueError, match="n >= 1"):
        traj.strobe(n=0)


# ------------------------------------------------------------ change of mobility
def _parallelogram():
    """A parallelogram four-bar (crank = rocker = 0.5, coupler = ground = 1) on its
    parallelogram branch q = [θ, -θ, θ]; flat (singular) at θ = 0."""
    b = ld.ModelBuilder("parallelogram", gravity=(0, -9.81, 0), planar=True)
    rod = dict(com=(0.25, 0, 0), inertia=(1e-3, 0.02, 0.02))
    b.add_body("crank", "ground", ld.Revolute("z"), mass=1.0, **rod)
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.5, 0, 0), mass=2.0,
               com=(0.5, 0, 0), inertia=(1e-3, 0.17, 0.17))  # fmt: skip
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1, 0, 0), mass=1.0, **rod)
    b.add_frame("coupler_tip", "coupler", xyz=(1, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.5, 0, 0))
    b.add_closure("c", "coupler_tip", "rocker_tip", "revolute")
    return b.build()


@pytest.mark.parametrize("stabilization", ["projection", "none", "baumgarte"])
def test_every_method_stops_at_the_same_change_of_mobility(stabilization):
    """Driven through its flat configuration the parallelogram could continue on either
    branch; every method stops there the same way, keeping the motion up to it."""
    model = _parallelogram()
    q0, v0 = np.array([0.6, -0.6, 0.6]), np.array([-3.0, 3.0, -3.0])
    stops = {}
    for method in ld.methods.dynamics.GENERAL_METHODS:
        with pytest.raises(ld.SimulationSingularityError, match=r"lost rank|lose rank") as e:
            ld.simulate(model, q0, v0, 1.0, method=method, stabilization=stabilization)
        traj = e.value.trajectory
        assert not traj.completed and traj.t[-1] == e.value.t
        theta = traj.q[:, 0]
        assert np.all(theta > 0.0)  # nothing past the flat configuration was kept
        stops[method] = e.value.t
    assert max(stops.values()) - min(stops.values()) < 1e-9, stops
    # with singularities="pass" the run goes on (documented: the branch is not chosen)
    traj = ld.simulate(model, q0, v0, 0.3, singularities="pass", stabilization=stabilization)
    assert traj.completed
    # RK4 has no error control: a step too long for the motion can also change the sign,
    # and the message says so (random mechanisms at dt = 1e-3 stopped so, well conditioned)
    with pytest.raises(ld.SimulationSingularityError, match=r"lost rank.*dt = 0.01 s is too"):
        ld.simulate(model, q0, v0, 1.0, integrator="RK4", dt=0.01, stabilization=stabilization)


def test_rk4_failures_name_the_fixed_step():
    """Random mechanism (23, 3) at RK4's default dt = 1e-3: its velocities grow past
    floating point (``ld.integrate`` overflows) and (23, 15) reaches a state whose mass
    matrix is numerically singular, in either loop; the adaptive DOP853 completes both.
    The errors say the fixed step may be the cause (they said only "integrate overflowed
    (|v dt| too large: dt = 1.0)", the chart's dt, and "the mass matrix is singular")."""
    import mechanisms as mx

    for i, kind in ((3, ld.SimulationError), (15, ld.SimulationSingularityError)):
        mech = mx.random_mechanism((23, i))
        args = (mech.model, mech.q, mech.v, 0.3)
        kw = dict(t_eval=31, rtol=1e-10, atol=1e-10)  # the census's options
        for compiled in (None, False):
            with pytest.raises(kind, match=r"RK4 step dt = 0.001 s is too long") as e:
                ld.simulate(*args, integrator="RK4", compiled=compiled, **kw)
            assert e.value.trajectory is not None and e.value.t < 0.3
        assert ld.simulate(*args, **kw).completed


def test_max_steps_and_interruption_keep_the_trajectory():
    model = ld.examples.four_bar()
    with pytest.raises(ld.SimulationError, match="max_steps") as e:
        ld.simulate(model, t_end=5.0, max_steps=20)
    assert e.value.trajectory is not None and 0.0 < e.value.t < 5.0
    assert len(e.value.trajectory) >= 2

    def interrupt(t, t_end):
        if t > 0.2:
            raise KeyboardInterrupt

    with pytest.raises(ld.SimulationInterrupted) as e:
        ld.simulate(model, t_end=1.0, progress=interrupt)
    assert isinstance(e.value, KeyboardInterrupt)
    traj = e.value.trajectory
    assert not traj.completed and 0.2 < traj.t[-1] < 1.0


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        (dict(t_end=np.inf), "t_end"),
        (dict(t_eval=10**8), "t_eval"),
        (dict(rtol=-1.0), "rtol"),
        (dict(atol=np.nan), "atol"),
        (dict(baumgarte=(-1.0, 2.0), stabilization="baumgarte"), "baumgarte"),
        (dict(integrator="RK4", dt=np.inf), "dt"),
        (dict(integrator="RK4", dt=1e-9), "max_steps"),
        (dict(max_step=0.0), "max_step"),
        (dict(constraint_tol=-1.0), "constraint_tol"),
        (dict(max_steps=0), "max_steps"),
        (dict(singularities="ignore"), "singularities"),
    ],
)
def test_simulate_refuses_bad_arguments_before_integrating(kwargs, culprit):
    with pytest.raises(ValueError, match=culprit):
        ld.simulate(ld.examples.four_bar(), **{"t_end": 1.0, **kwargs})


def test_denoc_warns_off_its_coordinates_and_integrates_in_them_without_fallback(monkeypatch):
    """DeNOC's q̈ is that of the velocity the actuated rates determine: with all
    coordinates integrated the stage velocities send calls to the augmented fallback
    (warned); in the independent coordinates every call is DeNOC's own.  The Python
    loop, whose calls the spy sees (the compiled loop takes the same fallback inside)."""
    used = []
    slow = dynamics._forward_dynamics

    def spy(*args):
        res = slow(*args)
        used.append(res.method)
        return res

    monkeypatch.setattr(dynamics, "_forward_dynamics", spy)
    with pytest.warns(UserWarning, match="partitioning"):
        ld.simulate(four_bar_90(), t_end=0.2, method="denoc", compiled=False)
    assert "augmented" in used
    used.clear()
    traj = ld.simulate(
        four_bar_90(), t_end=0.2, method="denoc", stabilization="partitioning", compiled=False
    )
    assert traj.completed and set(used) <= {"denoc"}
