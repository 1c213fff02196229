"""Exact or a named error: every forward-dynamics method on random closed-loop mechanisms.

Issue 11.  The mechanisms, the dense oracle and the verdicts live in ``mechanisms.py``:
a method must return q̈ within 1e-8 (relative to the problem's acceleration scale) of
the oracle, or raise ``ld.SingularityError``, and a ``SingularityError`` where the
oracle is well-conditioned (cond J M⁻¹ Jᵀ < 1e8 on its range, a clean rank gap, and
J q̈ = γ solvable) is a failure.  The same input through the model's cached workspace
and through a fresh ``model.create_data()`` must give the same answer, and
``ld.assemble`` must close every loop from any guess within 0.1 rad of q*.

Default run: 40 seeded mechanisms (deterministic, seed ``FAST_SEED``; reproduce case i
with ``python benchmarks/random_census.py --seed 2024 --show i``) and a derandomized
hypothesis run of small ones.  ``-m slow``: the census of ``CENSUS_N`` mechanisms
with seed ``CENSUS_SEED``.
"""

from functools import cache
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import loopdyn as ld
import mechanisms as mx
from loopdyn.methods.common import DIAG_REFINED, REFINE_LU_RATIO

FAST_SEED, FAST_N = 2024, 40
CENSUS_SEED, CENSUS_N = 11, 10_000
# derandomized, so the default run is deterministic (for a given hypothesis version);
# no shrinking there (the failure message prints the mechanism's code); the slow run
# draws more examples and shrinks them
HYPOTHESIS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
HYPOTHESIS_SLOW = settings(
    max_examples=1000,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


@cache
def fast_case(i):
    """(mechanism, oracle) of fast case i."""
    mech = mx.random_mechanism((FAST_SEED, i))
    return mech, mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)


def _where(i):
    return f"case {i} (python benchmarks/random_census.py --seed {FAST_SEED} --show {i})"


# --------------------------------------------------------------------------- the generator
def test_generator_covers_every_joint_type_closure_kind_and_redundancy():
    joints, kinds, planar_kinds, red = set(), set(), set(), set()
    sizes, masses, planar = [], [], 0
    for i in range(150):
        mech = mx.random_mechanism((FAST_SEED, i))
        m = mech.model
        joints.update(m.joint_types)
        (planar_kinds if mech.planar else kinds).update(m.closure_kinds)
        red.add(mech.redundancy)
        sizes.append(m.nbodies)
        masses.append(m.masses.max() / m.masses.min())
        planar += mech.planar
    assert joints == {"revolute", "prismatic", "universal", "spherical", "fixed", "free"}
    assert kinds == set(mx.SPATIAL_KINDS) and planar_kinds == set(mx.PLANAR_KINDS)
    assert red == {None, *mx.REDUNDANCIES}
    assert min(sizes) == 3 and max(sizes) >= 23
    assert max(masses) > 1e5
    assert 20 < planar < 80


@pytest.mark.parametrize("i", range(FAST_N))
def test_generated_states_are_consistent(i):
    mech, _ = fast_case(i)
    Phi, J, _ = ld.constraints(mech.model, mech.q, mech.v)
    assert np.abs(Phi).max() <= 1e-12
    assert np.abs(J @ mech.v).max(initial=0.0) <= 1e-12 * (1 + np.abs(mech.v).max(initial=0.0))
    assert mech.velocity_note is None, mech.velocity_note


@given(mx.mechanisms(max_bodies=8))
@HYPOTHESIS
def test_hypothesis_mechanisms_are_consistent(mech):
    Phi, J, _ = ld.constraints(mech.model, mech.q, mech.v)
    assert np.abs(Phi).max() <= 1e-12
    assert np.abs(J @ mech.v).max(initial=0.0) <= 1e-10 * (1 + np.abs(mech.v).max(initial=0.0))


def test_code_rebuilds_the_same_mechanism():
    mech, _ = fast_case(3)
    scope = {}
    exec(mech.code(), scope)
    np.testing.assert_array_equal(scope["q"], mech.q)
    assert scope["model"].nv == mech.model.nv and scope["model"].m == mech.model.m
    np.testing.assert_array_equal(
        ld.constraint_jacobian(scope["model"], mech.q), ld.constraint_jacobian(mech.model, mech.q)
    )


def test_shrink_keeps_the_predicate_and_drops_the_rest():
    mech = next(
        m for m in (mx.random_mechanism((FAST_SEED, i)) for i in range(50)) if m.model.nc >= 3
    )
    small = mx.shrink(mech, lambda x: x.model.nc >= 2)
    assert small.model.nc == 2 and small.model.nbodies < mech.model.nbodies
    assert np.abs(ld.closure_residual(small.model, small.q)).max() <= 1e-12


# --------------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("i", range(0, FAST_N, 4))
def test_oracle_solves_the_constrained_equations_of_motion(i):
    mech, o = fast_case(i)
    assert o.consistent
    rc, re = mx.residuals(o, o.qdd, mech.tau)
    assert rc <= 1e-12 and re <= 1e-12


def test_oracle_equals_aba_on_a_tree_and_augmented_on_the_four_bar():
    tree = ld.examples.random_tree(12, 0)
    rng = np.random.default_rng(0)
    q = tree.random_configuration(rng)
    v, tau = rng.normal(size=tree.nv), rng.normal(size=tree.nv)
    o = mx.dense_oracle(tree, q, v, tau)
    assert mx.relative_error(ld.aba(tree, q, v, tau), o) <= 1e-12
    fb = ld.examples.four_bar()
    v = ld.complete_velocity(fb, fb.q0, [1.0, 0.0, 0.0])
    o = mx.dense_oracle(fb, fb.q0, v, np.array([2.0, -1.0, 0.5]))
    res = ld.forward_dynamics(fb, fb.q0, v, [2.0, -1.0, 0.5], method="augmented")
    assert o.well and mx.relative_error(res.qdd, o) <= 1e-13


def test_oracle_flags_a_swapped_universal_pair_as_singular():
    """A universal closure and its swap are different constraints (a1_A·a2_B vs
    a1_B·a2_A): both hold at q*, which is therefore a singular configuration with no
    q̈ satisfying J q̈ = γ, not a redundant one."""
    b = ld.ModelBuilder("swapped_universal")
    b.add_body("a", "ground", ld.Spherical(), mass=1.0, com=(0.5, 0, 0), inertia=(0.1, 0.2, 0.2))
    b.add_body("c", "a", ld.Spherical(), xyz=(1, 0, 0), mass=1.0, com=(0.5, 0, 0))
    b.add_frame("tip", "c", xyz=(1, 0, 0))
    b.add_frame("g", "ground", xyz=(2, 0, 0))
    b.add_closure("u", "g", "tip", "universal", axis="x", axis2="y")
    b.add_closure("u_swapped", "tip", "g", "universal", axis="x", axis2="y")
    model = b.build()
    q = model.neutral()
    v = ld.complete_velocity(model, q, np.array([0.3, 0.2, -0.1, 0.4, -0.2, 0.1]), fixed=[])
    o = mx.dense_oracle(model, q, v, np.zeros(model.nv))
    assert not o.consistent and not o.well


# --------------------------------------------------------------------------- the methods
@pytest.mark.parametrize(
    "method",
    [
        "augmented",
        "slm",
        "sslm",
        "recursive_lambda",
        "embedding",
    ],
)
def test_exact_or_singularity_error_on_seeded_mechanisms(method):
    failures = []
    for i in range(FAST_N):
        mech, o = fast_case(i)
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        if not out.ok:
            failures.append(f"{_where(i)}: {out.kind}, error {out.error:.3g} {out.message[:150]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("method", mx.METHODS)
def test_cached_and_fresh_workspaces_give_the_same_answer(method):
    failures = []
    for i in range(FAST_N):
        mech, o = fast_case(i)
        fresh = mx.judge(mech, method, o, data=mech.model.create_data())
        why = mx.same_answer(mech, method, o, fresh, np.random.default_rng((FAST_SEED, i, 2)))
        if why:
            failures.append(f"{_where(i)}: {why}")
    assert not failures, "\n".join(failures)


def test_a_failed_call_at_an_inconsistent_state_leaves_no_rank_decision_behind():
    """Census case 6553 of seed 11: two revolute closures on the same frames, one with the
    frames swapped (rank 5 of 10 rows on the constraint manifold, 10 off it).  A call at an
    inconsistent q raises SingularityError; the next call at the consistent q must detect
    the rank again (it used to keep rank 10 and differ from a fresh Data by 3e-3)."""
    mech = mx.random_mechanism((11, 6553), max_bodies=25)
    model = mech.model
    rng = np.random.default_rng(0)
    ref = ld.forward_dynamics(model, mech.q, mech.v, mech.tau, data=model.create_data())
    for method in ("sslm", "slm", "augmented"):
        q1, v1, t1 = mx.other_state(mech, rng)
        with pytest.raises(ld.SingularityError):
            ld.forward_dynamics(model, q1, v1, t1, method=method)
        got = ld.forward_dynamics(model, mech.q, mech.v, mech.tau, method=method)
        assert got.rank == ref.rank == 5, method
        assert np.abs(got.qdd - ref.qdd).max() <= 1e-10 * np.abs(ref.qdd).max(), method


def test_denoc_refuses_the_seeded_mechanisms_by_name():
    """DeNOC applies to parallel mechanisms with one actuator per leg (``ld.parallel_structure``);
    none of the generated mechanisms is one (they have no actuators, free joints, generic
    closures or bodies joining three or more joints), so ``method="denoc"`` must raise
    the ModelError that names the failing assumption and the methods that apply."""
    for i in range(FAST_N):
        mech, _ = fast_case(i)
        with pytest.raises(ld.ModelError, match=r"assumption '.*' fails.*'augmented'"):
            ld.forward_dynamics(
                mech.model, mech.q, mech.v, mech.tau, method="denoc", data=mech.model.create_data()
            )


def _exact_or_singular(mech):
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.ok, f"{method}: {out.kind} {out.error:.3g} {out.message}\n{mech.code()}"


@given(mx.mechanisms(max_bodies=8, max_closures=3))
@HYPOTHESIS
def test_exact_or_singularity_error_on_hypothesis_mechanisms(mech):
    _exact_or_singular(mech)


def _inverse_paths_agree(mech):
    """ld.inverse_dynamics' compiled solve and its checked NumPy path (patched out of
    the call) both refuse the motion, or give the same τ, λ and over-actuation flag:
    with the model's actuators and with every coordinate driven (over-actuated)."""
    from unittest import mock

    from loopdyn.analysis import inverse

    m, q, v, tau = mech.model, mech.q, mech.v, mech.tau
    try:
        qdd = ld.forward_dynamics(m, q, v, tau).qdd
    except ld.SingularityError:
        return
    for act in (None, np.arange(m.nv)):
        a = m.actuated if act is None else act
        try:
            ref = inverse.generic_checked(m, q, v, qdd, a, 1e-8, 1e-6)
        except ld.ActuationError:
            ref = None
        with mock.patch.object(inverse, "generic_checked", side_effect=AssertionError):
            try:
                fast = ld.inverse_dynamics(m, q, v, qdd, actuated=act)
            except AssertionError:
                fast = None
        assert (fast is None) == (ref is None), mech.code()
        if ref is not None:
            scale = 1.0 + np.abs(ref.tau).max() + np.abs(ref.lam).max(initial=0.0)
            assert np.abs(fast.tau - ref.tau).max() <= 1e-10 * scale, mech.code()
            assert np.abs(fast.lam - ref.lam).max(initial=0.0) <= 1e-10 * scale, mech.code()
            assert fast.over_actuated == ref.over_actuated, mech.code()


@pytest.mark.filterwarnings("ignore::loopdyn.NonUniqueWarning")  # drives every coordinate
@given(mx.mechanisms(max_bodies=8, max_closures=3))
@HYPOTHESIS
def test_compiled_inverse_dynamics_equals_the_checked_path(mech):
    _inverse_paths_agree(mech)


@pytest.mark.filterwarnings("ignore::loopdyn.NonUniqueWarning")  # drives every coordinate
@pytest.mark.parametrize("i", range(0, FAST_N, 4))
def test_compiled_inverse_dynamics_on_seeded_mechanisms(i):
    _inverse_paths_agree(fast_case(i)[0])


@pytest.mark.slow
@given(mx.mechanisms())
@HYPOTHESIS_SLOW
def test_exact_or_singularity_error_on_many_hypothesis_mechanisms(mech):
    """Shrinks a failure to a small mechanism (hypothesis prints its ``code()``).

    Seeds 20261127 … 20261206 pass (``-m slow --hypothesis-seed=S``, 0.5-7 min
    each; 20261172, 20261178, 20261184 and 20261188 after the fixes their reproducers
    below record; 20261198 after two).  What this test found before, each fixed at
    its root: nearly
    dependent closures (augmented off by 5e-3), rows of 1e-10 among rows of 1, two rows
    parallel to 7e-11 (rcr 2e-8 off), Jᵀλ from world-pose wrenches (recursive_lambda, rcr,
    embedding 7.5e-2, 1.2e-5, 2.5e-8 off), levers of 1e-13 m from world positions and γ
    from absolute motions (every method and the oracle 0.5 off), sslm's λ loads
    cancelling in a floating base (9.6e-4 off), augmented's refinement judged against
    |J||λ| (1e-8 off), augmented not refining one LU solve of cond M 3.8e9 (1.55e-8 off),
    embedding accepting a Y1 of pivot ratio 2.9e-7 and cond 2e8 (6e-8 off), augmented
    accepting a refinement cut while converging, judged against overestimated free
    accelerations (1.35e-6 off), embedding and rcr not refining a heavy aggregated body
    whose articulated pivots looked benign (4.5e-8 off), a dropped row breaking at second
    order checked at the kept rows' scale (an answer where none exists); and in the
    judge, the dense oracle's limit at cond M 2.9e9 (``mx.tree_reference``), that
    reference's own ABA cancellations at cond M 1e10 (now refined by the RNEA), the
    exact rational reference's size limit (``EXACT_MAX``) and a row of 7.7e-13 of J's
    scale, not rounding, taken for a clean redundancy (seed 20261152); augmented
    accepting corrections that stopped shrinking, judged against overestimated free
    accelerations (seed 20261153, 2.3e-4 off); a subnormal closure row kept (seed
    20261160: every method singular on a state the oracle, which overflowed under load,
    called well conditioned); sslm's GICM pivot ratio blind to pivots spreading across
    1×1 blocks (seed 20261170, 1.2e-8 off); a vacuous dropped row with a non-zero γ
    checked at the other dropped rows' scale (seed 20261172: answers where none exists)."""
    _exact_or_singular(mech)


@pytest.mark.parametrize("i", range(FAST_N))
def test_assembly_from_every_guess_within_0_1_rad(i):
    mech, _ = fast_case(i)
    failures = mx.check_assembly(mech, np.random.default_rng((FAST_SEED, i, 1)), guesses=3)
    assert not failures, f"{_where(i)}:\n" + "\n".join(failures)


# --------------------------------------------------------------------------- reproducers
# Minimal mechanisms of the failure classes the census found on the current code.
def _outcome(model, q, v, tau, method):
    mech = mx.Mechanism(
        model, np.asarray(q, float), np.asarray(v, float), np.asarray(tau, float), []
    )
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    return mx.judge(mech, method, o, data=model.create_data())


def _rank0_arm():
    """A hinged arm with a welded tip and a weld closure between the two: the closure's
    rows are identically zero (rank 0), its multipliers arbitrary, q̈ the tree's."""
    b = ld.ModelBuilder("rank0")
    b.add_body(
        "arm", "ground", ld.Revolute("y"), mass=1.0, com=(0.5, 0, 0), inertia=(0.01, 0.1, 0.1)
    )
    b.add_body("tip", "arm", ld.Fixed(), xyz=(1, 0, 0), mass=0.5, inertia=(0.01, 0.01, 0.01))
    b.add_frame("arm_end", "arm", xyz=(1, 0, 0))
    b.add_frame("tip_origin", "tip")
    b.add_closure("weld", "arm_end", "tip_origin", "weld")
    return b.build()


@pytest.mark.parametrize(
    "method",
    [
        "augmented",
        "slm",
        "sslm",
        "recursive_lambda",
        "embedding",
    ],
)
def test_a_vacuous_closure_gives_the_tree_answer(method):
    model = _rank0_arm()
    out = _outcome(model, [0.3], [1.0], [0.5], method)
    assert out.kind == mx.AGREES, out
    qdd = ld.forward_dynamics(model, [0.3], [1.0], [0.5], method=method).qdd
    np.testing.assert_allclose(qdd, ld.aba(model, [0.3], [1.0], [0.5]), rtol=1e-12)


@pytest.mark.parametrize("method", mx.METHODS)
def test_a_ball_closure_on_a_hinge_centre_is_vacuous_while_it_moves(method):
    """Found by hypothesis: a ball closure on the centre of a tilted hinge under a
    spinning ball joint.  Its rows are identically zero; γ = -J̇q̇ was rounding
    (~1e-17) that J q̈ can never match, and is 0 since it comes from the motions
    relative to the loop's root (the ball joint's body); the answer is the tree's, not
    an error."""
    b = ld.ModelBuilder("vacuous_ball")
    b.add_body("b0", "ground", ld.Spherical(), rpy=(-0.34, 0.41, 0.84), mass=0.2,
               com=(-0.4, 0.05, 0.5), inertia=(0.001, 0.0012, 0.0013))  # fmt: skip
    hinge = (0.02, -0.43, -0.61)
    b.add_body("b1", "b0", ld.Revolute((0.82, 0.57, 0.0)), xyz=hinge, mass=1.0,
               com=(0.15, -0.31, -0.01), inertia=(7e-5, 7e-5, 7e-5))  # fmt: skip
    b.add_frame("on_b1", "b1", rpy=(0.0, 0.8, 0.0))
    b.add_frame("on_b0", "b0", xyz=hinge)
    b.add_closure("ball", "on_b1", "on_b0", "ball")
    model = b.build()
    q = np.array([0.77, 0.64, 0.0, 0.0, 0.3])
    q[:4] /= np.linalg.norm(q[:4])
    v, tau = np.array([-0.57, -0.04, -0.57, 0.9]), np.array([0.1, 1.5, -2.6, -1.4])
    _, J, gamma = ld.constraints(model, q, v)
    assert np.abs(J).max() < 1e-15 and ld.constraint_rank(model, q).rank == 0
    assert np.abs(gamma).max() < 1e-30  # the spin of the loop's root left 1e-17
    res = ld.forward_dynamics(model, q, v, tau, method=method)
    np.testing.assert_allclose(res.qdd, ld.aba(model, q, v, tau), rtol=1e-12, atol=1e-12)


def _spinning_hinges():
    """Hinges spinning about their common x axis, isotropic first body, a vacuous ball
    closure (hypothesis, seed 20261127): velocity products of size |v|² = 100 cancel."""
    b = ld.ModelBuilder("spin", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("x"), mass=1.0, inertia=(1 / 6, 1 / 6, 1 / 6))
    thin = (0.0026041666666666665, 0.08463541666666666, 0.08463541666666666)
    b.add_body("b1", "b0", ld.Revolute("x"), rpy=(0.0, 0.0, 1.0), mass=1.0, inertia=thin)
    b.add_body("b2", "b1", ld.Revolute("x"), mass=1.0, inertia=thin)
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1", rpy=(0.3, -0.8, 0.5))
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    return b.build(), np.array([0.0, 1.0, 0.0]), np.array([10.0, 0.0, 0.0]), 100.0


def _weight_on_a_hinge_line():
    """A weight on the line of the hinges' axis at rest, a vacuous ball closure
    (hypothesis, seed 20261127): gravity loads of size |g| = 9.81 cancel."""
    inertia = (1 / 6, 1 / 6, 1 / 6)
    b = ld.ModelBuilder("weight", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), mass=1.0, inertia=inertia)
    b.add_body("b1", "b0", ld.Fixed(), mass=1.0, inertia=inertia)
    b.add_body("b2", "b1", ld.Revolute("x"), mass=1.0, inertia=inertia)
    b.add_body("b3", "b2", ld.Revolute("z"), xyz=(0.0, 0.0, 0.5), rpy=(0.0625, 0.0, 0.0),
               mass=1.0, inertia=inertia)  # fmt: skip
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1")
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    return b.build(), np.zeros(3), np.zeros(3), 9.81


def _rounded_ball():
    """A ball closure on a spherical joint's centre, written to 16 digits (hypothesis,
    seed 20261127): its rows are 5e-17 (the rounding of the frame's position), two of
    them independent and well conditioned once scaled."""
    inertia = (1 / 6, 1 / 6, 1 / 6)
    b = ld.ModelBuilder("rounded_ball", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), mass=1.0, inertia=inertia)
    b.add_body("b1", "b0", ld.Fixed(), rpy=(0.0, 1.0, 0.0), mass=1.0, inertia=inertia)
    b.add_body("b2", "b1", ld.Spherical(), xyz=(0.0, 0.0, 0.5), mass=1.0, inertia=inertia)
    b.add_frame("c0_a", "b2")
    b.add_frame("c0_b", "b0", xyz=(0.4207354924039483, -2.7755575615628914e-17, 0.2701511529340699))
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    return model, np.array(model.q0), np.zeros(model.nv), 2


def _tiny_offset():
    """A ball closure 1e-165 m off two hinge axes through one point (the class the slow
    hypothesis test found): rows of 1e-165, one independent, condition 1 once scaled."""
    inertia = (1 / 6, 1 / 6, 1 / 6)
    b = ld.ModelBuilder("tiny_offset", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), mass=1.0, com=(0.3, 0.1, 0.0), inertia=inertia)
    b.add_body("b1", "b0", ld.Revolute("x"), mass=1.0, com=(0.0, 0.2, 0.1), inertia=inertia)
    b.add_frame("c0_a", "b1", xyz=(1e-165, 0.0, 0.0))
    b.add_frame("c0_b", "ground", xyz=(1e-165, 0.0, 0.0))
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    return model, np.array(model.q0), np.array([0.3, -0.2]), 1


@pytest.mark.parametrize("case", [_rounded_ball, _tiny_offset])
def test_tiny_but_independent_closure_rows_are_solved_not_refused(case):
    """Closure rows of 1e-17 or 1e-165, independent (J's rank is relative to its own
    scale): J M⁻¹ Jᵀ's pivots were below the tolerance (or underflowed) and augmented,
    slm, sslm and recursive_lambda raised SingularityError; augmented scales the rows
    by powers of two (the others fall back to it) and every method agrees with the
    oracle."""
    model, q, v, rank = case()
    tau = np.full(model.nv, 0.1)
    assert ld.constraint_rank(model, q).rank == rank
    assert np.abs(ld.constraint_jacobian(model, q)).max() < 1e-15
    o = mx.dense_oracle(model, q, v, tau)
    assert o.well and o.rank == rank
    for method in mx.METHODS:
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
        assert out.kind == mx.AGREES, (method, out)


def _nearly_dependent_balls():
    """Two ball closures 2^-23 m apart on the crank's hinge line (hypothesis, seed
    20261127, shrunk): σ_min(J) / σ_max 5e-8, just above the rank tolerance, so
    cond(J M⁻¹ Jᵀ) ~ 1e15 with the load (gravity) on the nearly dependent direction."""
    inertia = np.eye(3) / 6
    b = ld.ModelBuilder("nearly_dependent_balls")
    b.add_body("crank", "ground", ld.Revolute("z"), mass=1.0, inertia=inertia)
    b.add_body("link", "crank", ld.Spherical(), xyz=(-0.75, 0, 0), mass=1.0, inertia=inertia)
    b.add_body("tip", "link", ld.Revolute("z"), xyz=(0, 0.625, 0), mass=1.0, inertia=inertia)
    b.add_body("wheel", "tip", ld.Revolute("z"), mass=1.0, inertia=inertia)
    b.add_body("weight", "wheel", ld.Fixed(), mass=1.0, inertia=inertia)
    b.add_frame("c0_a", "crank")
    b.add_frame("c0_b", "link", xyz=(-0.75, 0, 0), rotation=[[-1, 0, 0], [0, -1, 0], [0, 0, 1]])
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    c, s, dz = 0.9989015683384429, 0.04685783574813424, 2.0**-23
    b.add_frame("c1_a", "crank", xyz=(0, 0, dz))
    b.add_frame(
        "c1_b", "tip", xyz=(-0.7784623235964161, -0.5891701034004261, dz),
        rotation=[[-c, -s, 0], [s, -c, 0], [0, 0, 1]],
    )  # fmt: skip
    b.add_closure("c1", "c1_a", "c1_b", "ball")
    return b.build(), np.array([0.0, 0.0, 0.0, 0.0, 1.0, 0.046875, 0.0])


def _one_kkt_solve(o, rows):
    """augmented's first solve, by its own LU kernels: (q̈, pivot ratio, ‖K‖₁ ‖U⁻¹‖₁)."""
    from loopdyn.kernels.linalg import lu_inplace, lu_inverse_norm, lu_solve

    n, J = o.M.shape[0], o.J[rows]
    s = np.array([2.0 ** -np.frexp(np.abs(row).max())[1] for row in J])
    K = np.block([[o.M, (s[:, None] * J).T], [s[:, None] * J, np.zeros((len(rows),) * 2)]])
    x, piv, w = np.r_[-o.h, s * o.gamma[rows]], np.zeros(len(K), np.int64), np.zeros(len(K))
    knorm = np.abs(K).sum(axis=1).max()
    ratio = lu_inplace(K, len(K), piv)
    lu_solve(K, len(K), piv, x)
    return x[:n], ratio, knorm * lu_inverse_norm(K, len(K), w)


def test_nearly_dependent_closures_are_refined_not_silently_wrong():
    """augmented refined only below an LU pivot ratio of 1e-9; here K's pivots (ratio
    1e-8) hide a condition of 3e15 (it goes with σ_min(J)², the pivots with σ_min(J))
    and one solve is off by 5e-3: augmented returned that without an error (slm 8e-6
    after refining: accepted unconverged).  Now K's condition is estimated, the solve
    refined to the oracle, and an unconverged refinement is refused (slm falls back)."""
    model, q = _nearly_dependent_balls()
    v = tau = np.zeros(model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    assert o.cond > 1e14 and not o.well and o.consistent
    rows = ld.constraint_rank(model, q).independent
    qdd, ratio, cond = _one_kkt_solve(o, rows)
    assert mx.relative_error(qdd, o) > 1e-3
    assert ratio > REFINE_LU_RATIO and cond > 1e15
    for method in mx.METHODS:
        d = model.create_data()
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=d)
        assert out.kind == mx.AGREES, (method, out)
    d = model.create_data()
    ld.forward_dynamics(model, q, v, tau, method="augmented", data=d)
    assert d.diag[DIAG_REFINED] >= 1


def _closure_off_a_hinge_by(offset):
    """A planar chain of 16 bodies (hypothesis, seed 20261127) whose first body is tied by
    a revolute closure to a point ``offset`` from the hinge of body 5: the closure's
    second row is ``offset`` times the first's, an exact constraint (the hinge cannot
    turn) however small, but 1e-10 of J's scale for ``offset`` = 1e-10."""
    inertia = np.eye(3) / 6
    b = ld.ModelBuilder("closure_off_a_hinge", gravity=(0.0, -9.81, 0.0), planar=True)
    s = 0.5**0.5
    chain = [ld.Prismatic((s, s, 0)), ld.Revolute("z"), ld.Prismatic("x"), ld.Fixed(),
             ld.Prismatic("x"), ld.Revolute("z"), ld.Fixed(), ld.Fixed(), ld.Prismatic("y"),
             ld.Revolute("z"), ld.Revolute("z"), ld.Fixed()] + [ld.Revolute("z")] * 4  # fmt: skip
    for i, joint in enumerate(chain):
        b.add_body(
            f"b{i}", f"b{i - 1}" if i else "ground", joint, mass=1.0, inertia=inertia,
            xyz=(offset if i == 5 else 0.0, 0, 0), com=(0, 0.5 if i == 1 else 0, 0),
        )  # fmt: skip
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b5", xyz=(-offset, 0, 0))
    b.add_closure("c0", "c0_a", "c0_b", "revolute")
    model = b.build()
    return model, np.zeros(model.nq)


def _heavy_crank_locked():
    """A crank of 1000 kg tied at 2^-23 m off its hinge line to another hinge (hypothesis,
    seed 20261127, after the fixes above): the row is 1.2e-7 of J's scale and 1e-9 of it
    weighted by M^-1/2, which the oracle drops; kept, it locks the crank (q̈ = 0).  The
    oracle's own rank-2 solution then violates that row: it calls the state inconsistent."""
    b = ld.ModelBuilder("heavy_crank_locked", gravity=(0.0, -9.81, 0.0), planar=True)
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b.add_body("b0", "ground", ld.Revolute("z"), xyz=(0.5, 0, 0), mass=1000.0,
               com=(0.5, 0, 0), inertia=np.eye(3) * 1000 / 6)  # fmt: skip
    b.add_body("b1", "b0", ld.Fixed(), **rod)
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("z"), **rod)
    b.add_body("b4", "ground", ld.Revolute("z"), mass=1.0,
               inertia=np.diag([0.10237797598018963, 0.10237797598018963, 1 / 6]))  # fmt: skip
    for i, (parent, joint, xyz) in enumerate([
        ("ground", ld.Revolute("z"), (0, 0, 0)), ("b5", ld.Revolute("z"), (0, 0, 0)),
        ("b6", ld.Revolute("z"), (0, 0, 0)), ("b7", ld.Revolute("z"), (0, 0, 0)),
        ("b8", ld.Revolute("z"), (0, 0, 0)), ("b9", ld.Fixed(), (0, 0, 0)),
        ("b10", ld.Revolute("z"), (0, 0, 0)), ("b11", ld.Revolute("z"), (0, 0.75, 0)),
    ]):  # fmt: skip
        b.add_body(f"b{i + 5}", parent, joint, xyz=xyz, **rod)
    b.add_body("b13", "b12", ld.Revolute("z"), mass=0.1, inertia=np.eye(3) * 0.1 / 6)
    b.add_body("b14", "b11", ld.Revolute("z"), **rod)
    b.add_body("b15", "b14", ld.Revolute("z"), **rod)
    dy = 2.0**-23
    b.add_frame("c0_a", "b0", xyz=(0, dy, 0))
    b.add_frame("c0_b", "b4", xyz=(0.5, dy, 0))
    b.add_closure("c0", "c0_a", "c0_b", "revolute")
    b.add_frame("c1_a", "b14")
    b.add_frame("c1_b", "b13", xyz=(0, -0.75, 0))
    b.add_closure("c1", "c1_a", "c1_b", "revolute")
    model = b.build()
    return model, np.zeros(model.nq)


@pytest.mark.parametrize("case", ["offset", "heavy"])
def test_a_closure_row_far_below_the_others_is_an_exact_constraint(case):
    """The judge's oracle drops a row of 1e-10 among rows of 1 (RANK_RTOL on unscaled
    singular values; the heavy crank's row: 1e-9 of them weighted by M^-1/2) and calls
    the state ambiguous; ``ld.constraint_rank`` keeps it, as the model as written says
    (the hinge cannot turn).  Every method must then solve the equations with that row
    exactly (``mechanisms.EXACT_AT_ITS_RANK``).  rcr's refinement stalled at 1e-8
    relative on the first (its loop reduction carries the 1e-10) and was accepted; a
    refinement that stalls above ``STALL_TOL`` now falls back to augmented."""
    model, q = _closure_off_a_hinge_by(1e-10) if case == "offset" else _heavy_crank_locked()
    v = tau = np.zeros(model.nv)
    info = ld.constraint_rank(model, q)
    o = mx.dense_oracle(model, q, v, tau)
    assert info.rank == o.rank + 1 and not o.well
    if case == "offset":
        assert info.singular_values[1] == pytest.approx(1e-10, rel=1e-6)
    else:  # the oracle's rank-2 answer violates the dropped row: 'no solution'
        assert not o.consistent and info.singular_values[2] == pytest.approx(2**-23, rel=1e-6)
    ref = ld.forward_dynamics(model, q, v, tau, method="augmented").qdd
    for method in mx.METHODS:
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
        assert out.kind == mx.EXACT_AT_ITS_RANK, (method, out)
        qdd = ld.forward_dynamics(model, q, v, tau, method=method).qdd
        assert np.abs(qdd - ref).max() <= 1e-10 * o.scale, method


def _parallel_closure_rows():
    """A planar chain prismatic - three hinges (the last 1e-10 m off the others' line) -
    prismatic, both prismatics on the same diagonal, closed by a revolute closure
    1e-10 m off the first body's origin: the closure's two rows stay parallel to 7e-11
    even equilibrated ([0, 0.7071] and [-1e-10, 0.7071]; hypothesis, seed 20261127,
    shrunk by hand)."""
    diag = (2**-0.5, 2**-0.5, 0.0)
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("parallel_rows", gravity=(0.0, -9.81, 0.0), planar=True)
    b.add_body("b0", "ground", ld.Prismatic(diag), **rod)
    b.add_body("b1", "b0", ld.Revolute("z"), **rod)
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("z"), xyz=(1e-10, 0, 0), com=(0, 0.5, 0), **rod)
    b.add_body("b4", "b3", ld.Prismatic(diag), **rod)
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b4", xyz=(-1e-10, 0, 0))
    b.add_closure("c0", "c0_a", "c0_b", "revolute")
    return b.build()


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_closure_rows_parallel_to_7e_11_are_refused_by_every_method(seed):
    """``ld.constraint_rank`` keeps both rows (rank 2), but the rank-2 answer is 1e10 times
    as sensitive as the data: augmented, slm, sslm and recursive_lambda refused (their
    refinements stall), rcr answered 2e-8 off the exact rank-2 solution of the same data
    (the judge's exact rational solve: 'silent'), embedding happened to be exact.  A
    loop reduction whose Y1 pivot ratio stays below ``embedding.SINGULAR_RATIO`` (now
    1e-7: the reduction carries 1/ρ into q̈) is singular, so every method raises
    ``SingularityError`` naming the condition, at rest and in motion."""
    model = _parallel_closure_rows()
    q = np.zeros(model.nq)
    info = ld.constraint_rank(model, q)
    assert info.rank == 2 and info.singular_values[1] == pytest.approx(7.07e-11, rel=1e-3)
    v = tau = np.zeros(model.nv)
    if seed is not None:
        rng = np.random.default_rng(seed)
        J = ld.constraint_jacobian(model, q)
        null = np.linalg.svd(J)[2][2:].T
        v, tau = 10 * null @ rng.normal(size=null.shape[1]), rng.normal(size=model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    assert not o.well
    for method in mx.METHODS:
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
        assert out.kind == mx.NAMED and "condition of J M^-1/2" in out.message, (method, out)


def test_the_judge_verifies_a_higher_rank_answer_exactly():
    """Where the oracle cannot decide a rank (the parallel rows above: cond ~1e20 at rank
    2, even equilibrated), the judge solves the method's rows exactly in rational
    arithmetic (``mechanisms._exact_rational``): the exact answer is
    ``EXACT_AT_ITS_RANK``, one moved by 1e-7 of the scale is 'silent'."""
    model = _parallel_closure_rows()
    q = v = tau = np.zeros(model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    res = SimpleNamespace(rank=2, dropped=np.zeros(0, dtype=np.int64), qdd=None)
    exact = mx._exact_rational(o, res, tau)
    assert np.abs(o.J @ exact - o.gamma).max() <= 1e-15
    assert np.abs(exact - o.qdd).max() > 0.1 * o.scale  # not the oracle's rank-1 answer
    res.qdd = exact
    assert mx._exact_at_rank(o, res, tau)
    res.qdd = exact + 1e-7 * o.scale
    assert not mx._exact_at_rank(o, res, tau)


def _ball_closure_off_a_universal_centre():
    """A free body carrying a universal joint 2.2e-13 m off its origin and a chain of two
    hinges, a ball closure from the body's origin to a frame of the universal's child
    written 2.2e-13 m back (hypothesis, seed 20261127): closure rows of 2.2e-13 and
    7e-18 that lock the universal through levers of that size, multipliers of 1e16."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("ball_at_universal", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Free(), xyz=(0, 0.5, 0), rpy=(0, 1, 1), **rod)
    b.add_body("b1", "b0", ld.Universal((1, 0, 0), (0, 1, 0)), xyz=(0, 2.1988372389383394e-13, 0),
               **rod)  # fmt: skip
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("z"), **rod)
    b.add_frame("c0_a", "b0")
    rot = [[1.0, -4.4353304393829585e-18, -7.893073757736798e-17],
           [-4.4353304393829585e-18, 1.0, 3.2806200687096644e-17],
           [-7.893073757736798e-17, 3.2806200687096644e-17, 1.0]]  # fmt: skip
    back = (4.464381131890047e-18, -2.198784184451465e-13, -6.952861660609913e-18)
    b.add_frame("c0_b", "b1", xyz=back, rotation=rot)
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[6] = 1.0  # the free body's quaternion
    v = np.zeros(model.nv)
    v[2] = 1.0
    return model, q, v


@pytest.mark.parametrize("method", mx.METHODS)
def test_multipliers_of_1e16_on_levers_of_1e_13_are_solved_exactly(method):
    """The oracle is 1.6e-6 from the exact answer here (rank 2 of rows 1e-13 and 1e-18,
    cond 1e9); the exact rational solve of its data is the reference, which every method
    returns to 1e-22 (``EXACT_AT_ITS_RANK``).  recursive_lambda was 7.5e-2 off without
    an error: its ζ took Jᵀ from the closure loads placed from the world poses, whose
    levers of 1e-13..1e-18 m lost their digits (Jᵀ no longer J's transpose), and its
    refinement measured the residual the same way; both now use J's rows
    (``common.kkt_residual``).  Since J and γ take their levers from the model's local
    offsets (``closure_levers``) the oracle agrees with the exact answer too."""
    model, q, v = _ball_closure_off_a_universal_centre()
    tau = np.zeros(model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    assert not o.well and o.rank == 2
    out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
    assert out.kind in (mx.AGREES, mx.EXACT_AT_ITS_RANK), out
    res = ld.forward_dynamics(model, q, v, tau, method=method)
    exact = mx._exact_rational(o, res, tau)
    assert np.abs(res.qdd - exact).max() <= 1e-12 * o.scale


@pytest.mark.parametrize("method", mx.METHODS)
def test_a_refinement_measures_the_equations_with_the_methods_own_j(method):
    """The universal joint 2.2e-13 m off the free body's origin again, at rest with a
    joint force, where the oracle is well conditioned (levers 2.2e-13 and 2.9e-17 m):
    rcr's Y1 quality 1.3e-4 triggers its refinement, whose residual took Jᵀλ from the
    closure loads (wrenches at world-pose levers) and converged 1.2e-5 off without an
    error; it now takes Jᵀλ from its loop blocks (``rcr.eom_residual``).  Every method
    agrees with the oracle (hypothesis, seed 20261127)."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("universal_off_centre", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Free(), xyz=(0, 0, 0.5), **rod)
    b.add_body("b1", "b0", ld.Universal((1, 0, 0), (0, 1, 0)), xyz=(2.1988372389383394e-13, 0, 0),
               **rod)  # fmt: skip
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("y"), **rod)
    b.add_frame("c0_a", "b0")
    c, s = 1.0000000000000007, -3.2862601528904633e-16
    b.add_frame("c0_b", "b1", xyz=(-2.1984560228228017e-13, 0, 2.8591208665519226e-17),
                rotation=[[c, 0, s], [0, 1, 0], [s, 0, 1]])  # fmt: skip
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[4], q[6] = 0.4472135954999579, 0.8944271909999159  # the free body's quaternion
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    tau[9] = 1.0
    o = mx.dense_oracle(model, q, v, tau)
    assert o.well
    out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
    assert out.kind == mx.AGREES, out


@pytest.mark.parametrize("method", mx.METHODS)
def test_embeddings_refinement_measures_with_its_own_j(method):
    """The same family, the last body's inertia spread (1.6e-4 against 8.3e-2): the
    articulated pivots trigger embedding's refinement, which measured Jᵀλ with the
    closure loads (world-pose levers) and converged 2.5e-8 off without an error; it
    now takes Jᵀλ from its J_𝒮 blocks (``embedding.eom_residual``).  Every method agrees
    with the oracle (hypothesis, seed 20261127)."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("universal_off_centre_2", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Free(), **rod)
    b.add_body("b1", "b0", ld.Universal((1, 0, 0), (0, 1, 0)), xyz=(2.1988372389383394e-13, 0, 0),
               **rod)  # fmt: skip
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    spread = np.diag([0.08341471354166666, 0.00016276041666666666, 0.08341471354166666])
    b.add_body("b3", "b2", ld.Revolute("y"), mass=1.0, inertia=spread)
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1", xyz=(-2.199351811782435e-13, 0, 0))
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[2], q[3], q[5] = 1.0, 2**-0.5, 2**-0.5  # the free body's position and quaternion
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    tau[9] = 1.0
    o = mx.dense_oracle(model, q, v, tau)
    assert o.well
    out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
    assert out.kind == mx.AGREES, out


@pytest.mark.parametrize("method", mx.METHODS)
def test_a_lever_of_1e_13_keeps_its_digits_on_a_spinning_body(method):
    """The family in motion (hypothesis, seed 20261127): the free body 0.5 m from the
    world origin spins, the universal's rates are 0, so γ = -J̇q̇ is exactly 0 and the
    closure's rows (levers 2.2e-13, 2.6e-17 m) lock the universal: q̈ of its two
    coordinates is 0.  Built from world positions, the levers p_B - o_j lost their last
    digits (and the 2.6e-17 ones all of them): γ came out as ω² times the lost lever
    (2.6e-17), which the rows of 2.6e-17 turned into q̈ = 0.5 in every method and the
    oracle alike (the oracle's least squares over the three rows, inconsistent by those
    digits, 6e-6 from the methods).  The levers are now summed from the model's local
    offsets along the loop (``closure_levers``): γ ~ 1e-29, q̈ of the universal 1e-13.
    With the body also translating and tumbling, γ still held ~1e-16 (the round-off of
    the two bodies' absolute motions, v × ω, subtracted) and q̈ of the universal was
    -4.9; γ now comes from the motions relative to the loop's root
    (``_relative_motions``): 0."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("spinning_universal_off_centre", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Free(), xyz=(0, 0, 0.5), **rod)
    b.add_body("b1", "b0", ld.Universal((1, 0, 0), (0, 1, 0)), xyz=(2.1988372389383394e-13, 0, 0),
               **rod)  # fmt: skip
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("z"), **rod)
    b.add_frame("c0_a", "b0")
    e, f, g = -4.9343245538895844e-17, -6.78469626159818e-17, -6.1679056923619835e-18
    b.add_frame("c0_b", "b1", xyz=(-2.198572505524771e-13, 1.323667067846219e-17,
                                   -2.6473341356861272e-17),
                rotation=[[1.0000000000000002, e, f], [e, 1.0000000000000002, g],
                          [f, g, 1.0000000000000002]])  # fmt: skip
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[4:7] = 0.8164965809277261, 0.4082482904638631, 0.4082482904638631  # quaternion
    tau = np.zeros(model.nv)
    spin = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    tumble = [0.3, -0.2, 1.0, 1.0, 0.5, 2.0]  # and translate: γ held 1e-16 of v × ω
    for free in (spin, tumble):
        v = np.r_[free, 0.0, 0.0, 0.7, -0.4]
        assert np.abs(ld.constraint_bias(model, q, v)).max() < 1e-27
        o = mx.dense_oracle(model, q, v, tau)
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
        assert out.kind == mx.AGREES, out
        qdd = ld.forward_dynamics(model, q, v, tau, method=method).qdd
        assert np.abs(qdd[6:8]).max() < 1e-10 * o.scale


def _loops_placed_at(x0):
    """A spatial 4R chain from the ground closed on the ground by a ball closure, and
    the same chain on a free body closed on that body, every offset measured from
    ``x0`` (dyadic numbers, so the model at x0 is the one at the origin moved exactly)."""
    x0 = np.asarray(x0, float)
    rod = dict(mass=0.5, com=(0.125, 0, 0), inertia=(0.01, 0.02, 0.03))
    b = ld.ModelBuilder("placed_loops", gravity=(0.0, 0.0, -9.81))
    base = dict(mass=2.0, inertia=(0.5, 0.25, 0.375))
    b.add_body("f0", "ground", ld.Free(), xyz=np.add(x0, [0, 2, 0]), **base)
    for chain, root, first in (("g", "ground", x0), ("f", "f0", (0, 0, 0))):
        b.add_body(f"{chain}1", root, ld.Revolute("z"), xyz=first, **rod)
        b.add_body(f"{chain}2", f"{chain}1", ld.Revolute("y"), xyz=(0.25, 0, 0), **rod)
        b.add_body(f"{chain}3", f"{chain}2", ld.Revolute("x"), xyz=(0.5, 0, 0), **rod)
        b.add_body(f"{chain}4", f"{chain}3", ld.Revolute("z"), xyz=(0, 0.5, 0), **rod)
        b.add_frame(f"{chain}_tip", f"{chain}4", xyz=(0.25, 0, 0))
        b.add_frame(f"{chain}_anchor", root, xyz=np.add(first, [0.75, 0.625, 0.0]))
        b.add_closure(f"{chain}_ball", f"{chain}_anchor", f"{chain}_tip", "ball")
    return b.build()


def test_closure_kinematics_do_not_depend_on_where_the_loops_are():
    """Φ, J, γ and every method's q̈ of two loops (one closing on the ground, one on a
    free body) are the same at the origin and moved 2^17..2^19 m away, exactly the same
    model: the levers are summed along the loops, not taken as differences of world
    positions (which lose eps · 3e5 m = 7e-11 m of each lever there)."""
    import scipy.linalg as sla

    near = _loops_placed_at((0.0, 0.0, 0.0))
    far = _loops_placed_at((2.0**17, -(2.0**18), 2.0**19))
    angles = [0.3, -0.4, 0.5, 0.6]
    q = ld.assemble(near, np.r_[0, 0, 0, 0.5, 0.5, 0.5, 0.5, angles, angles], fixed=[])
    rng = np.random.default_rng(3)
    v = sla.null_space(ld.constraint_jacobian(near, q)) @ rng.normal(size=near.nv - 6)
    Phi_n, J_n, g_n = ld.constraints(near, q, v)
    Phi_f, J_f, g_f = ld.constraints(far, q, v)
    assert np.abs(Phi_f - Phi_n).max() <= 1e-15
    assert np.abs(J_f - J_n).max() <= 1e-13 * np.abs(J_n).max()
    assert np.abs(g_f - g_n).max() <= 1e-13 * np.abs(g_n).max()
    tau = rng.normal(size=near.nv)
    for method in mx.METHODS:
        a = ld.forward_dynamics(near, q, v, tau, method=method).qdd
        c = ld.forward_dynamics(far, q, v, tau, method=method).qdd
        assert np.abs(c - a).max() <= 1e-12 * np.abs(a).max(), method


@pytest.mark.parametrize("method", mx.METHODS)
def test_augmented_refines_to_the_size_of_qdd_not_of_the_multipliers(method):
    """A universal closure whose frames sit 6e-8 m off the joint centres, at rest
    (hypothesis, seed 20261128): rows of 6e-8 next to rows of 1, KKT cond 2e15,
    multipliers of 1.6e8.  augmented (and the four methods that fall back to it) judged
    its refinement converged when a correction fell below 4e-16 of the size of the
    combined terms, (|φ| + |J||λ|) / M_ii = 1e11, i.e. 3e-5: q̈ was left 1.03e-8 of the
    scale from the exact answer without an error.  Corrections are now judged against
    the size of q̈ and of the free accelerations; five steps reach 7e-16.  sslm refines
    with its own factors (KKT cond 2e15: each step gains ~2e-3) down to its rounding
    floor, where its corrections stop shrinking at 7e-13..3.5e-12 of a q̈ of 12: where
    it stops there is rounding (1.1e-14 from the exact answer with q̈ from the ABA,
    1.8e-13 with q̈ from the I_j's factors), so it is held to 1e-12."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("universal_off_centres", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Spherical(), rpy=(0.0, 1.0, 0.5), **rod)
    b.add_body("b1", "ground", ld.Universal((1, 0, 0), (0, 1, 0)), xyz=(0, 0.5, 0),
               mass=31.622776601683793, inertia=(1.3176156917368247, 3.2940392293420615,
                                                 3.2940392293420615))  # fmt: skip
    b.add_body("b2", "b0", ld.Fixed(), xyz=(0, 0.5, 0), **rod)
    b.add_body("b3", "b2", ld.Revolute("z"), **rod)
    b.add_body("b4", "b3", ld.Fixed(), **rod)
    thin = (0.08463541666666666, 0.08365885416666666, 0.0016276041666666665)
    b.add_body("b5", "b4", ld.Revolute("z"), mass=1.0, inertia=thin)
    b.add_frame("c0_a", "b0", xyz=(0, 0, 5.960464477539063e-08))
    rot = [[-0.4741598817790379, 0.479425538604203, 0.7384602626041288],
           [-0.2590347239999257, -0.8775825618903728, 0.4034226801113349],
           [0.8414709848078965, 0.0, 0.5403023058681398]]  # fmt: skip
    b.add_frame("c0_b", "b1", xyz=(4.4015661633260773e-08, -0.4999999759541345,
                                   3.2204527012594924e-08), rotation=rot)  # fmt: skip
    b.add_closure("c0", "c0_a", "c0_b", "universal", axis=(1, 0, 0), axis2=(0, 1, 0))
    model = b.build()
    q = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    v = tau = np.zeros(model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    assert not o.well and o.cond > 1e14
    out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
    assert out.kind == mx.AGREES, out
    res = ld.forward_dynamics(model, q, v, tau, method=method)
    exact = mx._exact_rational(o, res, tau)
    assert np.abs(res.qdd - exact).max() <= (1e-12 if method == "sslm" else 1e-13) * o.scale


def test_augmented_refines_a_mass_matrix_of_cond_4e9():
    """A chain with mass ratios 0.01..1000 and coincident hinge axes (cond M 3.8e9), a
    vacuous ball closure, at rest with one joint force (hypothesis, seed 20261129): the
    O(n) methods are 1e-12 from the oracle; augmented's one LU solve of M was 1.55e-8
    off and refined by neither trigger (pivot ratio 3.7e-9 > ``REFINE_LU_RATIO``, its
    condition estimate < 1e11).  ``REFINE_LU_COND`` is now 1e8 (one solve's error ~
    cond·eps): it refines, 1e-12."""
    from loopdyn.methods.common import DIAG_REFINED

    def rod(m, ix, iy, iz):
        return dict(mass=m, inertia=np.diag([ix, iy, iz]))

    cube, slab = (
        rod(1.0, 1 / 6, 1 / 6, 1 / 6),
        rod(1.0, 1 / 6, 0.10416666666666666, 0.10416666666666666),
    )
    b = ld.ModelBuilder("mass_ratios", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), **cube)
    b.add_body("b1", "b0", ld.Spherical(), **slab)
    b.add_body(
        "b2",
        "b1",
        ld.Revolute((-1, 0, 0)),
        **rod(1.0, 0.08598657890285133, 0.03824404141876704, 0.10557109365495171),
    )
    b.add_body(
        "b3",
        "b2",
        ld.Spherical(),
        **rod(0.01, 0.0008341471354166667, 0.0008337910970052084, 1.2715657552083335e-06),
    )
    b.add_body(
        "b4", "b3", ld.Revolute("z"), **rod(10.0, 5 / 3, 1.0416666666666667, 1.0416666666666667)
    )
    b.add_body("b5", "b4", ld.Revolute("z"), **cube)
    b.add_body(
        "b6",
        "b5",
        ld.Revolute("z"),
        **rod(1.0, 0.10416666666666666, 0.10416666666666666, 0.041666666666666664),
    )
    b.add_body("b7", "b6", ld.Revolute("z"), **rod(10.0, 5 / 3, 5 / 3, 5 / 3))
    b.add_body(
        "b8",
        "b7",
        ld.Revolute("y"),
        xyz=(0, 0.5, 0),
        **rod(1.0, 0.08854166666666666, 1 / 6, 0.08854166666666666),
    )
    b.add_body("b9", "b8", ld.Revolute("z"), **cube)
    b.add_body(
        "b10",
        "b9",
        ld.Revolute("y"),
        **rod(1000.0, 88.54166666666666, 166.66666666666666, 88.54166666666666),
    )
    b.add_body("b11", "b10", ld.Revolute("z"), **cube)
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1", rotation=[[-1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]])
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[4] = q[9] = 1.0  # the two spherical joints' quaternions
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    tau[11] = 1.0
    o = mx.dense_oracle(model, q, v, tau)
    assert o.cond_M > 1e9
    d = model.create_data()
    out = mx.judge(mx.Mechanism(model, q, v, tau, []), "augmented", o, data=d)
    assert out.kind == mx.AGREES and out.error < 1e-10, out
    assert d.diag[DIAG_REFINED] > 0
    assert mx.relative_error(ld.aba(model, q, v, tau), o) < 1e-10


def _coincident_hinges_chain():
    """Hypothesis seed 20261129: 12 bodies, masses 0.034..1000, seven coincident z hinges,
    a vacuous ball closure, at rest with one joint force; cond M 2.9e9."""
    cube = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("coincident_hinges", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), **cube)
    b.add_body("b1", "b0", ld.Spherical(), **cube)
    b.add_body("b2", "b1", ld.Revolute("z"), **cube)
    b.add_body(
        "b3",
        "b2",
        ld.Spherical(),
        mass=0.03398208328942559,
        inertia=np.diag([0.0028346057431364933, 4.072585233088636e-06, 0.0028331473903341936]),
    )
    b.add_body("b4", "b3", ld.Revolute("y"), **cube)
    for k in range(5, 9):
        b.add_body(f"b{k}", f"b{k - 1}", ld.Revolute("z"), **cube)
    b.add_body("b9", "b8", ld.Revolute("z"), xyz=(0.75, 0, 0), **cube)
    b.add_body("b10", "b9", ld.Revolute("z"), mass=1000.0, inertia=np.eye(3) * 1000 / 6)
    b.add_body("b11", "b10", ld.Revolute("z"), **cube)
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1", rotation=[[-1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]])
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[4] = q[9] = 1.0  # the two spherical joints' quaternions
    tau = np.zeros(model.nv)
    tau[8] = 1.0
    return mx.Mechanism(model, q, np.zeros(model.nv), tau, [])


def test_the_judge_takes_the_tree_reference_where_the_dense_oracle_cannot_resolve_it():
    """Seed 20261129's case: every method and ``ld.aba`` agree to 1e-16 and differ from the
    dense oracle by 1.25e-8 > REL_TOL, where the oracle's own data noise (M rounded, cond
    2.9e9) is 7.3e-7.  ``mx.tree_reference`` (ABA on the tree, M never formed) decides
    there: every method agrees with it, and an answer 1e-7 off it is still a silent wrong
    answer."""
    mech = _coincident_hinges_chain()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well and o.cond_M > 1e9 and o.noise > 10 * mx.REL_TOL
    ref = mx.tree_reference(mech.model, mech.q, mech.v, mech.tau, o)
    assert mx.REL_TOL < mx.relative_error(ref, o) < o.noise
    assert np.abs(ld.aba(mech.model, mech.q, mech.v, mech.tau) - ref).max() <= 1e-14 * o.scale
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.AGREES and "tree-recursion" in out.message, (method, out)
    res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau)
    off = SimpleNamespace(qdd=res.qdd.copy(), rank=res.rank, dropped=res.dropped)
    off.qdd[3] += 1e-7 * o.scale
    assert mx.classify(mech, off, o).kind == mx.SILENT


def test_the_tree_reference_equals_the_dense_oracle_where_both_resolve():
    """The judge's second reference against its first on the fast cases it applies to
    (well-conditioned, consistent): equal to 1e-10 of the scale where the oracle's data
    noise is below 1e-11."""
    n = 0
    for i in range(FAST_N):
        mech, o = fast_case(i)
        if not o.well or o.noise > 1e-11:
            continue
        ref = mx.tree_reference(mech.model, mech.q, mech.v, mech.tau, o)
        assert ref is not None and mx.relative_error(ref, o) <= 1e-10, _where(i)
        n += 1
    assert n >= FAST_N // 2


def _pivots_hide_the_condition():
    """Hypothesis seed 20261130, shrunk: a ball and a universal closure in one aggregated
    body whose Y1 (12 rows) has LU pivot ratio 2.9e-7 but cond₁ ~1e8."""
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81), planar=False)
    b.add_body(
        "b0",
        "ground",
        ld.Prismatic(axis=(-0.4861910610643473, 0.6772073324862725, -0.5522757291135935)),
        xyz=(-0.5795612518964681, 0.1, 0.0591751709536137),
        rpy=(-1.7509584601597565, -5.375645900614989e-32, 2.292352013835047),
        mass=1.0,
        com=(0.0, 0.0, 0.0),
        inertia=(0.012, 0.012, 0.018),
    )
    b.add_body(
        "b1",
        "b0",
        ld.Fixed(),
        xyz=(-0.35, -0.6345996218807877, -0.00034046500868740456),
        rpy=(0.38656444745093443, -2.430294483540487e-129, 0.02),
        mass=0.071,
        com=(0.0, 0.0, 0.0),
        inertia=[
            [0.00219274735149603, 1.4798566835395524e-19, -1.1907387468008127e-19],
            [1.4798566835395524e-19, 0.0009843526661305136, 0.0009723119740563985],
            [-1.1907387468008127e-19, 0.0009723119740563985, 0.0012191130251692623],
        ],
    )
    b.add_body(
        "b2",
        "b1",
        ld.Universal(
            axis1=(0.9966617307193504, 1.5555616502282909e-263, -0.08164186744256385),
            axis2=(-0.06026247255939071, 0.6746563516956888, -0.7356678880566229),
        ),
        xyz=(-4.311593533556325e-307, 0.3040059240399051, 9.345850768995587e-114),
        rpy=(-2.997072275426592e-134, -0.5496500729383662, -0.6795797378022939),
        mass=1000.0,
        com=(-0.38435333570567387, 0.17333310190912943, 3.2289384124136624e-298),
        inertia=[
            [10.596509484654122, -2.3153393324472757e-73, 2.4060088970553895e-73],
            [-2.3153393324472757e-73, 6.191793750888188, 4.577206069072825],
            [2.4060088970553895e-73, 4.577206069072825, 4.47217988451097],
        ],
    )
    b.add_body(
        "b5",
        "b2",
        ld.Spherical(),
        xyz=(-1.401298464324817e-45, -2.456627195023482e-280, -5.960464477539063e-08),
        rpy=(-1.921254616105269, 1.373101924660371, 0.007567897660545699),
        mass=0.021,
        com=(0.0, 0.0, 0.0),
        inertia=(0.0014, 0.0007, 0.00091),
    )
    b.add_body(
        "b6",
        "b5",
        ld.Revolute(axis=(0.0, 0.0, 1.0)),
        xyz=(0.17522177711767473, 9.245125679364173e-305, -0.4368815766742533),
        rpy=(0.08119405190155327, 0.04, 1.0622376021783912),
        mass=2.7,
        com=(0.0, 0.0, 0.0),
        inertia=[
            [0.029446589830878785, -0.0017577071039504737, 1.7485679138719868e-114],
            [-0.0017577071039504737, 0.0019297503460093126, 2.748500789434452e-113],
            [1.7485679138719868e-114, 2.748500789434452e-113, 0.031193528362955334],
        ],
    )
    b.add_body(
        "b7",
        "b6",
        ld.Prismatic(axis=(0.9026873199470303, -1.4071927035356548e-234, -0.4302971094567654)),
        xyz=(1.249667300091529e-101, 0.7994693250600056, 0.0),
        rpy=(-2.220446049250313e-16, 0.0, -0.7002027968842155),
        mass=1.2,
        com=(0.0, 0.0, 0.0),
        inertia=(0.013, 0.012, 0.025),
    )
    b.add_body(
        "b11",
        "b7",
        ld.Spherical(),
        xyz=(0.17082860872947386, 0.03592215352223549, 0.125),
        rpy=(4.348471351356571e-22, 2.9781133910240227e-136, 2.309744745957804),
        mass=0.0013,
        com=(0.0, 0.0, 0.0),
        inertia=(0.00016, 0.00014, 0.00012),
    )
    b.add_body(
        "b15",
        "b11",
        ld.Fixed(),
        xyz=(-0.6430807761584291, 0.5667149535193777, 0.7706202710143433),
        rpy=(7.433716394983075e-157, 1.0793156064556958e-212, -2.2397068510973446),
        mass=1.0,
        com=(0.0, 0.0, 0.0),
        inertia=(0.056, 0.048, 0.056),
    )
    b.add_body(
        "b16",
        "b15",
        ld.Spherical(),
        xyz=(0.04063129405036725, 2.9290725660007024e-88, 0.08876275643042054),
        rpy=(3.1311743331590067, 0.5707963267948966, -2.097028041833301),
        mass=0.15,
        com=(-0.16840954210542786, 0.3184389315373115, 0.17688083765558027),
        inertia=(0.0042, 0.011, 0.012),
    )
    b.add_body(
        "b17",
        "b16",
        ld.Revolute(axis="z"),
        xyz=(0.03709200011850479, 0.10718999714573685, -0.6534991192309725),
        rpy=(1.431213218675068, 0.28949059013852874, -1.0858573659024033e-260),
        mass=0.069,
        com=(0.4735996896411723, 0.5, 0.16345954723011713),
        inertia=(0.0083, 0.0058, 0.009),
    )
    b.add_body(
        "b20",
        "ground",
        ld.Fixed(),
        xyz=(0.5362718775724886, -0.07265114481064627, -0.6813161066708251),
        rpy=(-1.2912981022626624, 2.220446049250313e-16, -2.2250738585e-313),
        mass=1.0,
        com=(0.0, 0.0, 0.0),
        inertia=(0.098, 0.085, 0.047),
    )
    b.add_body(
        "b21",
        "b20",
        ld.Revolute(axis=(0.9985956214120477, 0.05297909867755485, -3.003983285715985e-181)),
        xyz=(-0.31990628883253286, 0.7800276979382663, 0.5719112609919106),
        rpy=(0.7595405019559842, -1.480874209497266e-138, -0.9823963830755393),
        mass=13.0,
        com=(0.0, 0.0, 0.0),
        inertia=(0.94, 0.76, 0.58),
    )
    b.add_frame(
        "c1_a",
        "b5",
        xyz=(-0.6952562225588259, 2.2250738585072014e-308, -0.04322085441349388),
        rpy=(2.225073858507e-311, -7.715029174685136e-266, -3.0287577691290024),
    )
    b.add_frame(
        "c1_b",
        "b0",
        xyz=(-0.40651715342817585, 0.33387804860865583, 0.010615008714570336),
        rotation=[
            [-0.07732425501599026, 0.45690557233143897, -0.8861479885203727],
            [0.9585130547366509, -0.21051854928068867, -0.19218393353287525],
            [-0.2743604991350547, -0.8642448949118731, -0.42167176587142924],
        ],
    )
    b.add_closure("c1", "c1_a", "c1_b", "ball")
    b.add_frame(
        "c3_a",
        "b15",
        xyz=(-1.1125369292536007e-308, -0.19999999999999996, -5.960464477539063e-08),
        rpy=(-3.1415926535897927, 1.042689559756345, 2.277241229482816),
    )
    b.add_frame(
        "c3_b",
        "b21",
        xyz=(1.65758406415002, -1.4617339271539442, -0.7239443555312424),
        rotation=[
            [-0.9911457759962473, 0.10826841379009658, 0.07686352385998291],
            [-0.1198727797603758, -0.48068543462479235, -0.8686610556552511],
            [-0.057101378243595624, -0.870183580352417, 0.489407773832548],
        ],
    )
    b.add_closure(
        "c3",
        "c3_a",
        "c3_b",
        "universal",
        axis=(0.5403023058681398, -1.6544885919531793e-128, -0.8414709848078965),
        axis2=(-0.700168803955659, -0.5546598658551631, -0.4495732189275007),
    )
    model = b.build()
    q = np.array(
        [
            -0.3871832692136141,
            1e-10,
            0.45883211719165784,
            0.24575399032169054,
            -0.5803451123288448,
            0.7473832799786289,
            0.21029208174672992,
            -0.1772900506135877,
            -1.520041748376379e-277,
            1.0,
            -1.1680153768671745e-163,
            0.0,
            2.776072784512238e-183,
            -0.12203342413912865,
            5.64697648887e-313,
            -0.9555630431263745,
            -0.2683414131362175,
            -8.447929684621076e-51,
            -1.0667804727775532,
        ]
    )
    v = np.array(
        [
            -0.08948416437885484,
            -0.034891496435443314,
            0.03859530991246442,
            -0.14225128491448696,
            0.01926798462685314,
            -0.013138713093909146,
            0.16115175714652027,
            -0.04712828441001337,
            0.06621648111237713,
            -0.1455388474201978,
            -0.2067636679538828,
            -0.07239820020351925,
            -0.20366718415273952,
            0.009036541972308682,
            0.25348383235219896,
            -0.006373802914966309,
        ]
    )
    tau = np.array(
        [
            0.0056,
            0.19,
            0.028,
            -0.69,
            5.5e-152,
            0.29,
            0.71,
            -0.6,
            0.037,
            -2.1e-227,
            -0.38,
            0.63,
            4.5e-95,
            0.66,
            -4.5e-263,
            0.49,
        ]
    )
    return mx.Mechanism(model, q, v, tau, [])


def test_embedding_judges_y1_by_its_condition_not_only_its_pivots():
    """Embedding accepted a partition at pivot ratio 2.9e-7 (> ``SINGULAR_RATIO``) whose Y1
    has cond₁ ~1e8: q̈ 2.1e-8 of the scale off (6e-8 on the unshrunk case), silent.  Below
    a pivot ratio of 0.1 it now also computes cond₁(Y1) and judges 1/cond₁: the call falls
    back to augmented, which agrees."""
    from loopdyn.methods import embedding as E

    mech = _pivots_hide_the_condition()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent and max(p.condition for p in E.partition_at(mech.model, mech.q)) > 1e7
    res = ld.forward_dynamics(
        mech.model, mech.q, mech.v, mech.tau, method="embedding", data=mech.model.create_data()
    )
    assert res.method == "augmented"
    out = mx.judge(mech, "embedding", o, data=mech.model.create_data())
    assert out.kind == mx.AGREES, out


def _slowly_converging_refinement():
    """Hypothesis seed 20261130, shrunk: two nearly dependent ball closures (σ_min(J) 2e-8
    relative to σ_max), a body of inertia 0.03 beside masses of 1000."""
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81), planar=False)
    b.add_body(
        "b0",
        "ground",
        ld.Prismatic(axis=(-0.4861910610643473, 0.6772073324862725, -0.5522757291135935)),
        xyz=(-0.5795612518964681, 0.1, 0.0591751709536137),
        rpy=(-1.7509584601597565, -5.375645900614989e-32, 2.292352013835047),
        mass=1.0,
        com=(0.0, 0.0, 0.0),
        inertia=(0.012, 0.012, 0.018),
    )
    b.add_body(
        "b1",
        "b0",
        ld.Fixed(),
        xyz=(-0.35, -0.6345996218807877, -0.00034046500868740456),
        rpy=(0.38656444745093443, -2.430294483540487e-129, 0.02),
        mass=0.071098626060708,
        com=(0.0, 0.0, 0.0),
        inertia=[
            [0.00219274735149603, 1.4798566835395524e-19, -1.1907387468008127e-19],
            [1.4798566835395524e-19, 0.0009843526661305136, 0.0009723119740563985],
            [-1.1907387468008127e-19, 0.0009723119740563985, 0.0012191130251692623],
        ],
    )
    b.add_body(
        "b2",
        "b1",
        ld.Universal(
            axis1=(0.9966617307193504, 1.5555616502282909e-263, -0.08164186744256385),
            axis2=(-0.06026247255939071, 0.6746563516956888, -0.7356678880566229),
        ),
        xyz=(-4.311593533556325e-307, 0.3040059240399051, 9.345850768995587e-114),
        rpy=(-2.997072275426592e-134, -0.5496500729383662, -0.6795797378022939),
        mass=999.999999999999,
        com=(-0.38435333570567387, 0.17333310190912943, 3.2289384124136624e-298),
        inertia=[
            [10.596509484654122, -2.3153393324472757e-73, 2.4060088970553895e-73],
            [-2.3153393324472757e-73, 6.191793750888188, 4.577206069072825],
            [2.4060088970553895e-73, 4.577206069072825, 4.47217988451097],
        ],
    )
    b.add_body(
        "b5",
        "b2",
        ld.Spherical(),
        xyz=(-1.401298464324817e-45, -2.456627195023482e-280, -5.960464477539063e-08),
        rpy=(-1.921254616105269, 1.373101924660371, 0.007567897660545699),
        mass=0.020600343513390254,
        com=(0.27761639120619175, 0.2440944881889764, -1.1996041253201566e-87),
        inertia=[
            [0.001396497422866854, 0.00028337998547467306, 2.3431788878868527e-05],
            [0.00028337998547467306, 0.0006950732130380365, -6.628205500379164e-05],
            [2.3431788878868527e-05, -6.628205500379164e-05, 0.0009067409139100763],
        ],
    )
    b.add_body(
        "b6",
        "b5",
        ld.Revolute(axis=(0.0, 0.0, 1.0)),
        xyz=(0.17522177711767473, 9.245125679364173e-305, -0.4368815766742533),
        rpy=(0.08119405190155327, 0.04, 1.0622376021783912),
        mass=2.742177208991365,
        com=(-0.31678897395854255, -0.44217218280663784, 0.07544918903967301),
        inertia=[
            [0.029446589830878785, -0.0017577071039504737, 1.7485679138719868e-114],
            [-0.0017577071039504737, 0.0019297503460093126, 2.748500789434452e-113],
            [1.7485679138719868e-114, 2.748500789434452e-113, 0.031193528362955334],
        ],
    )
    b.add_body(
        "b9",
        "b5",
        ld.Revolute(axis=(3.0699288299719075e-248, 1.4688986630343428e-98, -1.0)),
        xyz=(-0.2666605025816672, 0.09810900964873548, 0.3860031499911005),
        rpy=(0.16445030185865034, 3.616414147596264e-119, -1.2443339049826965),
        mass=289.11207421654075,
        com=(2.608328715198106e-118, -5.755227103384352e-45, -1.991597471959935e-07),
        inertia=[
            [8.664063061768807, 0.06570183635897177, 3.4259695567683384],
            [0.06570183635897177, 13.716838573274677, 0.09989243057144026],
            [3.4259695567683384, 0.09989243057144026, 11.61952490274014],
        ],
    )
    b.add_body(
        "b10",
        "b9",
        ld.Spherical(),
        xyz=(0.2112714831666307, 0.1962199171179828, -2.225073858507203e-309),
        rpy=(-1.9080710436149557, 0.21433748967024302, -0.46295252937537423),
        mass=1.0,
        com=(-0.1368478787562148, 0.0017942791957034077, 0.5),
        inertia=[
            [0.16238914457837345, -2.1515269646207618e-20, -0.0035158116380220716],
            [-2.1515269646207618e-20, 0.08405327793220557, -5.046210153566318e-19],
            [-0.0035158116380220716, -5.046210153566318e-19, 0.08007889290681762],
        ],
    )
    b.add_body(
        "b11",
        "b10",
        ld.Fixed(),
        xyz=(0.0, -0.7968542413858842, 0.12868611569331478),
        rpy=(-5.2366770714751175e-120, 0.9072842131279542, -1.727867793456657),
        mass=0.005581319508663693,
        com=(0.09344837613504187, 0.39268381527516527, 0.07694080590598695),
        inertia=[
            [7.831298888194143e-05, 6.012971333282157e-07, -1.8544210521129376e-05],
            [6.012971333282157e-07, 0.00016722662385910297, -5.317665458970399e-06],
            [-1.8544210521129376e-05, -5.317665458970399e-06, 0.00024021472767990897],
        ],
    )
    b.add_body(
        "b12",
        "b11",
        ld.Spherical(),
        xyz=(-0.7553758425938235, 0.4905404774204485, 6.103515625e-05),
        rpy=(-1.2716082202689587, -1.0662600307854855, -4.322926166116072e-70),
        mass=1.125823842524928,
        com=(8.415279107850417e-123, 0.25523334859035063, 0.34907347907700625),
        inertia=[
            [0.08753199819770412, 0.008936955482009661, 0.027312171284755882],
            [0.008936955482009661, 0.1178798308557873, -0.0007360205002965795],
            [0.027312171284755882, -0.0007360205002965795, 0.05323339277290479],
        ],
    )
    b.add_body(
        "b13",
        "b12",
        ld.Universal(
            axis1=(0.8134821449599335, -0.05285410019020419, -0.5791832559082396),
            axis2=(-0.5762872180809263, 0.06091758347251537, -0.8149736746057604),
        ),
        xyz=(-0.5923702920073438, 3.212074084856081e-206, -0.2727611463019133),
        rpy=(2.0456764755456938, -1.1125369292536007e-308, 5.86992521993193e-193),
        mass=1.0000230261160268,
        com=(0.23703733293075968, 0.0028662201495767148, 0.3783526010155729),
        inertia=[
            [0.04287748253039431, -0.015152136995159049, -0.0004299507465783339],
            [-0.015152136995159049, 0.020799889689837328, -0.000403057189596041],
            [-0.0004299507465783339, -0.000403057189596041, 0.05902919256800961],
        ],
    )
    b.add_body(
        "b14",
        "b13",
        ld.Spherical(),
        xyz=(-0.4849935170654166, -0.02279282858493681, -0.15535872031228148),
        rpy=(-2.86555870776056, 0.056167502283047954, -6.802823320967871e-270),
        mass=0.24055111247006508,
        com=(-3.5580305742750245e-90, -0.2501429531110752, -0.4680327367192907),
        inertia=[
            [0.020864434535702504, -0.004269792587566747, -0.003387793146908672],
            [-0.004269792587566747, 0.0073149887171475225, -0.004075595261271036],
            [-0.003387793146908672, -0.004075595261271036, 0.02117994141209505],
        ],
    )
    b.add_body(
        "b15",
        "b14",
        ld.Revolute(axis=(1.0, -1.5371684989131113e-139, -7.34647052810162e-77)),
        xyz=(-0.6746141789776943, -1.4878238852300267e-294, -0.24437879052553935),
        rpy=(1.175494351e-38, 0.35229001179372976, 0.34162693985131565),
        mass=12.99509642328421,
        com=(0.08629539364646799, 2.9561997013920622e-148, 0.00611036849580493),
        inertia=[
            [0.6560757790922518, 0.019369553477718862, -0.028610105304222432],
            [0.019369553477718862, 0.7557470801137796, 0.0053644545872155785],
            [-0.028610105304222432, 0.0053644545872155785, 1.401767656618064],
        ],
    )
    b.add_body(
        "b16",
        "b15",
        ld.Fixed(),
        xyz=(0.04415068081821594, 0.11247417209770005, 0.3890348653817748),
        rpy=(-2.2250738585e-313, 1e-20, 1.0),
        mass=1.0,
        com=(-0.1367733469850831, -0.02913919139642418, -3.045206433754988e-282),
        inertia=[
            [0.10211526056956925, -0.008957495916898487, -0.005970758731541775],
            [-0.008957495916898487, 0.057653627023880334, -0.030794277224566423],
            [-0.005970758731541775, -0.030794277224566423, 0.05276617330372154],
        ],
    )
    b.add_body(
        "b17",
        "b16",
        ld.Universal(
            axis1=(0.22350339404662664, -0.29605844372007445, 0.9286525888359359),
            axis2=(0.8807043901915121, 0.46955573524616795, -0.06226707472515057),
        ),
        xyz=(1.1125369292536007e-308, 0.08270674206861361, -0.16338248344196005),
        rpy=(0.924834003261792, 4.401971217058549e-121, 1.907275273962445),
        mass=2.154434690031884,
        com=(0.48432337836821016, 0.003407126359443624, 5.2368667154315875e-130),
        inertia=[
            [0.058649728286138, 0.04195680518653164, 0.05034796440013736],
            [0.04195680518653164, 0.16975320981801437, -0.01074913348159538],
            [0.05034796440013736, -0.01074913348159538, 0.173306287550265],
        ],
    )
    b.add_frame(
        "c0_a",
        "b5",
        xyz=(-0.4714146441414019, -0.590290826836843, -0.19999999999999996),
        rpy=(-0.8139648647453961, -1.4346656575693213, 0.5930969647314717),
    )
    b.add_frame(
        "c0_b",
        "b0",
        xyz=(0.023979124784629186, 0.08574178219577586, -0.40918180011389355),
        rotation=[
            [-0.8972911248024182, -0.3179845556657697, -0.30619350043535276],
            [-0.29257135747920177, -0.09102449098572417, 0.9519015405090842],
            [-0.330561095916608, 0.9437162520582302, -0.011357705207407077],
        ],
    )
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    b.add_frame(
        "c1_a",
        "ground",
        xyz=(-0.05018358843694648, -0.03712193722466406, 0.7140942788060571),
        rpy=(0.03183464816350214, 7.471887759061988e-236, -1.6973951905180615),
    )
    b.add_frame(
        "c1_b",
        "b0",
        xyz=(-0.6408755595350044, -0.3271280411077782, -0.6330887691587972),
        rotation=[
            [-0.6613684711018832, -0.7496811204246665, 0.023873900208680708],
            [-0.13440277312685076, 0.08713586102022572, -0.9870882616565128],
            [0.7379211611060966, -0.656037772847784, -0.1583881327270126],
        ],
    )
    b.add_closure("c1", "c1_a", "c1_b", "ball")
    model = b.build()
    q = np.array(
        [
            -0.3871832692136141,
            1e-10,
            0.45883211719165784,
            0.24575399032169054,
            -0.5803451123288448,
            0.7473832799786289,
            0.21029208174672992,
            -0.1772900506135877,
            2.454657319923764,
            -0.147659964047365,
            -1.5080402921524827e-306,
            0.9890381840386503,
            -7.437109338751854e-05,
            -0.0,
            -1.4061203547263809e-210,
            0.17706747997938632,
            -0.9841987134383734,
            -1.3064208464669502,
            -2.1096072429800765,
            -0.817398439692757,
            -0.4708185750044719,
            -0.33194827943311417,
            2.1395158640754865e-267,
            0.06637157309656538,
            -2.3433766402270573,
            1.1,
        ]
    )
    v = np.array(
        [
            -4.805760187546656e-47,
            -0.11885091455996921,
            0.8290261191230609,
            0.43356204537851717,
            0.4044749282399682,
            0.2948597289909324,
            -1.1353518779537723,
            -0.041528477635931926,
            0.8104300947921709,
            -0.8345601492570106,
            5.784810544639588e-246,
            -0.050489859314947795,
            -1.4739808051514167,
            -0.014989782912754688,
            1.4739808051514167,
            -1.1040230065466226,
            -1.4739808051514167,
            -2.2931379703690266e-151,
            0.1473980805151417,
            -0.13117004777323177,
            0.42425136910603045,
            -3.2728948554692593e-16,
        ]
    )
    tau = np.array(
        [
            1.9e-131,
            -0.64,
            -0.64,
            0.49,
            -0.59,
            -0.84,
            -0.83,
            0.86,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
        ]
    )
    return mx.Mechanism(model, q, v, tau, [])


def test_augmented_judges_an_unconverged_refinement_by_the_size_of_qdd():
    """augmented's refinement converged by a factor 0.2 a step and was cut after 6 steps
    with q̈ 1.1e-6 of the scale off (1.35e-6 unshrunk): the error it left, |δ_last|²/
    |δ_prev|, was judged against the free accelerations |φ|/min M_ii = 2.7e5 instead of
    their true size 33 (|M⁻¹φ|), and accepted (every method falls back to augmented).
    It is now also judged against max(|q̈|, |v|², |g|): a named error (the state is not
    well conditioned: cond J M⁻¹ Jᵀ ~1e16)."""
    mech = _slowly_converging_refinement()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent and not o.well
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.ok, (method, out)
    out = mx.judge(mech, "augmented", o, data=mech.model.create_data())
    assert out.kind == mx.NAMED, out


def _heavy_body_in_an_aggregated_loop():
    """Hypothesis seed 20261133, shrunk: one ball closure from a free body around a loop of
    16 coordinates (spherical, universal and revolute joints) through a body of 460 kg
    among bodies of 1 kg, inertias 0.00014 to 60; the closure's third row vacuous (rank 2)."""
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81), planar=False)
    z = (0.0, 0.0, 0.0)
    ux = ld.Universal((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    for name, parent, joint, xyz, rpy, mass, inertia in (
        ("b0", "ground", ld.Free(), z, z, 1.0, (0.12, 0.092, 0.068)),
        ("b4", "b0", ld.Spherical(), z, z, 1.0, (0.042, 0.042, 0.00014)),
        ("b5", "b4", ld.Revolute("z"), z, (0.0, -0.75393743498019, 0.0), 0.12,
         (0.0023, 0.0037, 0.006)),
        ("b7", "b5", ux, z, z, 1.0, (0.013, 0.072, 0.075)),
        ("b8", "b7", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.4885437757026747, -0.8), z, 1.0,
         (0.0018729543224602768, 0.08336666666666664, 0.08517295432246026)),
        ("b11", "b8", ld.Spherical(), z, z, 460.0, (38.0, 27.0, 60.0)),
        ("b12", "b11", ux, z, z, 1.0, (0.12, 0.13, 0.15)),
        ("b13", "b12", ld.Spherical(), z, z, 1.0, (0.039, 0.056, 0.024)),
        ("b14", "b13", ld.Fixed(), z, z, 5.2, (0.061, 0.17, 0.23)),
        ("b15", "b14", ld.Spherical(), z, z, 1.0,
         (0.05500720812327656, 0.04614122729780863, 0.05948176875441852)),
    ):  # fmt: skip
        b.add_body(name, parent, joint, xyz=xyz, rpy=rpy, mass=mass, com=z, inertia=inertia)
    c, s = 0.7289992956880307, 0.684514446075724
    b.add_frame("c0_a", "b0", xyz=z, rpy=z)
    b.add_frame(
        "c0_b", "b15", xyz=(0.0, -0.4885437757026747, 0.8),
        rotation=[[-c, 0.0, s], [0.0, -1.0, 0.0], [s, 0.0, c]],
    )  # fmt: skip
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[[6, 10, 18, 24, 25]] = (-1.0, 1.0, -1.0, 1.0, 1.0)  # the quaternions' entries
    tau = np.zeros(model.nv)
    tau[6] = -0.8
    return mx.Mechanism(model, q, np.zeros(model.nv), tau, [])


@pytest.mark.parametrize("method", ["embedding", "rcr"])
def test_the_residual_decides_a_refinement_the_articulated_pivots_miss(method):
    """embedding's and rcr's recursion left q̈ 1.9e-8 of the scale off (4.5e-8 unshrunk,
    the residual of the equations of motion 7.7e-9) at an articulated pivot ratio of
    1.4e-4, above ``REFINE_PIVOT_RATIO``: no refinement, and the acceptance check (the
    closure rows) passed.  Below ``CHECK_PIVOT_RATIO`` the residual now decides (one
    RNEA); the answer is refined to the reference.  The other methods agree unrefined."""
    mech = _heavy_body_in_an_aggregated_loop()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well and o.rank == 2
    d = mech.model.create_data()
    out = mx.judge(mech, method, o, data=d)
    assert out.kind == mx.AGREES, out
    assert d.diag[DIAG_REFINED] > 0


def _light_body_before_a_heavy_one():
    """Hypothesis seed 20261142, shrunk: a chain of universal, revolute and spherical joints
    from the ground whose body of 6.2 g (inertia 4.2e-7) carries, five joints on, one of
    480 kg (cond M 1e10); beside it a free body with a vacuous ball closure to the body
    welded to it (rank 0)."""
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81), planar=False)
    z = (0.0, 0.0, 0.0)
    ux = ld.Universal((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
    for name, parent, joint, xyz, rpy, mass, inertia in (
        ("b0", "ground", ld.Free(), z, z, 1.0,
         (0.07489996645744085, 0.08161188072068429, 0.15634293970750948)),
        ("b1", "b0", ld.Fixed(), z, z, 1.0, (0.00087, 0.0045, 0.0053)),
        ("b3", "ground", ux, z, z, 1.0, (0.00015, 0.018, 0.018)),
        ("b4", "b3", ux, z, z, 1.0, (0.14, 0.13, 0.1)),
        ("b5", "b4", ld.Fixed(), z, z, 1.0, (0.011, 0.085, 0.093)),
        ("b6", "b5", ld.Revolute((0.0, 0.0, -1.0)), z, z, 1.0, (0.0067, 0.0073, 0.014)),
        ("b7", "b6", ux, z, z, 1.0, (0.0053, 0.033, 0.037)),
        ("b8", "b7", ld.Revolute((0.0, 0.0, -1.0)), z, z, 1.0, (0.018, 0.061, 0.079)),
        ("b9", "b8", ld.Spherical(), (0.0, 0.0, 0.44748940171077933), z, 0.0062,
         (4.2e-07, 4.2e-07, 4.2e-07)),
        ("b10", "b9", ld.Revolute((0.0, 0.0, 1.0)), z,
         (0.0, 0.13177099606945597, -0.4651695537911532), 1.0, (0.001, 0.079, 0.08)),
        ("b11", "b10", ld.Spherical(), (0.0, 0.0, -0.3703271329784801), z, 1.0,
         (0.007, 0.061, 0.068)),
        ("b12", "b11", ld.Revolute((0.0, 0.0, 1.0)), z, z, 1.0, (0.053, 0.067, 0.11)),
        ("b13", "b12", ld.Fixed(), (0.0, -0.8, 0.0), z, 479.97605646846444, (41.0, 41.0, 80.0)),
    ):  # fmt: skip
        b.add_body(name, parent, joint, xyz=xyz, rpy=rpy, mass=mass, com=z, inertia=inertia)
    b.add_frame("c0_a", "b0", xyz=z, rpy=z)
    b.add_frame("c0_b", "b1", xyz=z, rpy=z)
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    model = b.build()
    q = np.zeros(model.nq)
    q[[6, 18, 23]] = (-1.0, -1.0, 1.0)  # the quaternions' entries
    return mx.Mechanism(model, q, np.zeros(model.nv), np.zeros(model.nv), [])


def test_the_tree_reference_refines_abas_own_cancellations():
    """Seed 20261142's finding was in the judge: every method agreed to 1e-16 and was
    called silently wrong, 7.1e-8 from the tree reference (the dense oracle's noise
    1.5e-7 there: cond M 1e10), whose free accelerations were one unrefined ABA pass.
    ABA's cancellations between articulated inertias (a 6 g body before a 480 kg one)
    cost that much; refined against the RNEA the reference is the methods' answer.
    An answer 1e-7 off is still silent."""
    mech = _light_body_before_a_heavy_one()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well and o.noise > 0.1 * mx.REL_TOL
    ref = mx.tree_reference(mech.model, mech.q, mech.v, mech.tau, o)
    aba = ld.aba(mech.model.spanning_tree(), mech.q, mech.v, mech.tau)
    assert np.abs(aba - ref).max() > 1e-8 * o.scale  # what the refinement removes
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.AGREES, (method, out)
    res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau)
    res.qdd[-1] += 1e-7 * o.scale
    assert mx.classify(mech, res, o).kind == mx.SILENT


def _vacuous_row_breaking_at_second_order():
    """Hypothesis seed 20261144: a planar chain folded onto one point (every joint at 0)
    with two revolute closures there; J has rank 1 and the first closure's x row is
    identically zero at q while its γ = -J̇ v is not: J v = 0 holds, J q̈ = γ cannot."""
    b = ld.ModelBuilder("random", gravity=(0.0, -9.81, 0.0), planar=True)
    i1 = (1 / 6, 1 / 6, 1 / 6)
    for name, parent, joint, mass, inertia in (
        ("b0", "ground", ld.Revolute("z"), 1.0, i1),
        ("b1", "b0", ld.Fixed(), 1.0, i1),
        ("b2", "b1", ld.Revolute("z"), 1.0, i1),
        ("b3", "b2", ld.Revolute("z"), 1.0, i1),
        ("b4", "b3", ld.Prismatic((0.0, 1.0, 0.0)), 1.0, i1),
        ("b5", "b4", ld.Revolute("z"), 1.0, i1),
        ("b6", "b5", ld.Fixed(), 10.0, (5 / 3, 5 / 3, 5 / 3)),
        ("b7", "b6", ld.Revolute("z"), 1.0, i1),
        ("b8", "b6", ld.Revolute("z"), 0.001, (1.25e-3 / 12, 1.25e-3 / 12, 0.5e-3 / 12)),
        ("b9", "b7", ld.Prismatic((0.0, 1.0, 0.0)), 1.0, i1),
    ):  # fmt: skip
        b.add_body(name, parent, joint, mass=mass, com=(0.0, 0.0, 0.0), inertia=inertia)
    b.add_frame("c0_a", "b8", xyz=(0.5, 0.0, 0.0))
    b.add_frame("c0_b", "b0", xyz=(0.5, 0.0, 0.0))
    b.add_closure("c0", "c0_a", "c0_b", "revolute")
    b.add_frame("c1_a", "b0")
    b.add_frame("c1_b", "b1")
    b.add_closure("c1", "c1_a", "c1_b", "revolute")
    model = b.build()
    v = np.array([0.0, -1, -1, -2, -1, 0.0, 0.0, 7]) / 32
    return mx.Mechanism(model, np.zeros(model.nq), v, np.zeros(model.nv), [])


def test_a_dropped_row_is_checked_at_its_own_scale():
    """The first closure's x row is dropped (zero at q) but its γ = -0.0156 is not
    rounding: no q̈ satisfies J q̈ = γ (the closure breaks at second order).  Every method
    returned an answer: the dropped rows were checked against |J| of all rows times the
    acceleration scale, 3.3e6 (|φ|/min M_ii with a 1 g body), so 1e-8 · 1.4 · 3.3e6 let
    the residual 0.0156 pass.  Each dropped row now has its own scale |J_d| (0 here):
    a SingularityError for every method."""
    mech = _vacuous_row_breaking_at_second_order()
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert not o.consistent and o.rank == 1
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.NAMED, (method, out)


def test_the_condition_estimate_is_a_lower_bound_close_to_the_true_norm():
    """``lu_inverse_norm`` ≤ ‖U⁻¹‖₁ always (it is ‖U⁻¹ y‖ / ‖y‖), within a factor 30 on
    random matrices (99 % within 8; worst of 500 random 40×40: 19), and finds the
    exponential growth of a triangle whose pivots are all 1 (U = I - strict upper ones:
    ‖U⁻¹‖₁ = 2^(n-1), pivot ratio 1)."""
    from loopdyn.kernels.linalg import lu_inplace, lu_inverse_norm

    rng = np.random.default_rng(7)
    for n in (1, 2, 5, 12, 40):
        for _ in range(20):
            A = rng.normal(size=(n, n)) * np.exp(rng.normal(scale=3, size=n))
            piv, w = np.zeros(n, np.int64), np.zeros(n)
            F = A.copy()
            assert lu_inplace(F, n, piv) > 0
            exact = np.abs(np.linalg.inv(np.triu(F))).sum(axis=0).max()
            est = lu_inverse_norm(F, n, w)
            assert exact / 30 <= est <= exact * (1 + 1e-12)
    n = 30
    U = np.eye(n) - np.triu(np.ones((n, n)), 1)
    piv, w = np.zeros(n, np.int64), np.zeros(n)
    assert lu_inplace(U, n, piv) == 1.0
    assert 2.0 ** (n - 2) <= lu_inverse_norm(U, n, w) <= 2.0 ** (n - 1)


@pytest.mark.parametrize("case", [_spinning_hinges, _weight_on_a_hinge_line])
def test_cancelling_loads_are_judged_against_their_size(case):
    """q̈ = 0 but for the round-off of loads that cancel (h ~ 1e-16), which each method
    sums in its own order: relative to |q̈| ~ 1e-16 the methods differed by 100 %
    ('silent wrong answers' of the judge, found by hypothesis); the oracle's scale now
    includes the size of those loads' accelerations (|v|², |g|), and every method's q̈
    is the tree's to 1e-15 absolute."""
    model, q, v, expected_scale = case()
    tau = np.zeros(model.nv)
    o = mx.dense_oracle(model, q, v, tau)
    assert o.scale == expected_scale and np.abs(o.qdd).max() < 1e-12
    tree = ld.aba(model, q, v, tau)
    for method in mx.METHODS:
        out = mx.judge(mx.Mechanism(model, q, v, tau, []), method, o, data=model.create_data())
        assert out.kind == mx.AGREES, (method, out)
        qdd = ld.forward_dynamics(model, q, v, tau, method=method).qdd
        np.testing.assert_allclose(qdd, tree, rtol=0.0, atol=1e-15)


@pytest.mark.parametrize(
    "method",
    [m for m in mx.METHODS],
)
def test_a_model_where_nothing_moves_returns_an_empty_qdd_or_refuses_to_build(method):
    b = ld.ModelBuilder("frozen")
    b.add_body("a", "ground", ld.Fixed(), xyz=(1, 0, 0))
    b.add_body("c", "ground", ld.Fixed(), xyz=(0, 1, 0))
    b.add_frame("fa", "a")
    b.add_frame("fc", "c", xyz=(1, -1, 0))
    b.add_closure("ball", "fa", "fc", "ball")
    try:
        model = b.build()
    except ld.ModelError:
        return
    res = ld.forward_dynamics(model, [], [], [], method=method)
    assert res.qdd.shape == (0,)


def test_a_model_where_nothing_moves_goes_through_every_analysis():
    """nv = 0 (every joint fixed, closures between the fixed bodies: census seed 15,
    cases 875 and 2172): velocities, inverse dynamics, simulation and the batches answer
    with empty coordinates and zero multipliers, as ``forward_dynamics`` does; they
    raised numpy's "zero-size array to reduction operation maximum" (the parallel
    inverse-dynamics batch a ``SystemError``)."""
    mech = mx.random_mechanism((15, 875), max_bodies=25)
    model = mech.model
    assert model.nv == 0 and model.m > 0
    e = np.zeros(0)
    assert ld.complete_velocity(model, e, e).shape == (0,)
    assert ld.complete_velocity(model, e, e, fixed=[]).shape == (0,)
    inv = ld.inverse_dynamics(model, e, e, e)
    assert inv.tau.shape == (0,) and np.array_equal(inv.lam, np.zeros(model.m))
    tr = ld.simulate(model, e, e, t_end=0.1, t_eval=3)
    assert tr.completed and tr.q.shape == (3, 0)
    (tb,) = ld.simulate_batch(model, np.zeros((1, 0)), t_end=0.1, t_eval=3)
    assert tb.completed and tb.q.shape == (3, 0)
    Z = np.zeros((4, 0))
    ib = ld.inverse_dynamics_batch(model, Z, Z, Z)
    assert ib.ok and ib.tau.shape == (4, 0) and np.array_equal(ib.lam, np.zeros((4, model.m)))
    fb = ld.forward_dynamics_batch(model, Z)
    assert fb.ok and fb.qdd.shape == (4, 0)
    with pytest.raises(ValueError, match="nothing moves"):  # was numpy's reshape error
        ld.gicm(model, e)


@pytest.mark.parametrize(
    "axis",
    [
        "z",
        "x",
        (1, 1, 0),
        (1, 2, 3),
    ],
)
def test_a_revolute_closure_allows_finite_rotation_about_its_axis(axis):
    """A revolute closure that repeats a tree hinge must stay closed at every angle.

    Its rotation rows used to be the triads of two directions ⟂ axis, which agree with
    a hinge only to first order unless the axis is x, y or z (Φ(θ) ~ θ²; the census's
    inconsistent 'swapped revolute' cases); they are now b_A·a_B and c_A·a_B."""
    b = ld.ModelBuilder("hinge")
    b.add_body("link", "ground", ld.Revolute(axis), mass=1, com=(0.3, 0.1, 0))
    b.add_frame("g", "ground")
    b.add_frame("l", "link")
    b.add_closure("c", "g", "l", "revolute", axis=axis)
    model = b.build()
    for th in (0.1, 0.5, 1.0, 2.0):
        assert np.abs(ld.closure_residual(model, [th])).max() <= 1e-14, th


def _parallelogram(theta):
    """A parallelogram four-bar (crank = rocker = 0.5, coupler = ground = 1) at crank
    angle θ on its parallelogram branch: q = [θ, -θ, θ], tangent t = [1, -1, 1]."""
    b = ld.ModelBuilder("parallelogram", gravity=(0, -9.81, 0), planar=True)
    rod = dict(com=(0.25, 0, 0), inertia=(1e-3, 0.02, 0.02))
    b.add_body("crank", "ground", ld.Revolute("z"), mass=1.0, **rod)
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.5, 0, 0), mass=2.0,
               com=(0.5, 0, 0), inertia=(1e-3, 0.17, 0.17))  # fmt: skip
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1, 0, 0), mass=1.0, **rod)
    b.add_frame("coupler_tip", "coupler", xyz=(1, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.5, 0, 0))
    b.add_closure("c", "coupler_tip", "rocker_tip", "revolute")
    return b.build(), np.array([theta, -theta, theta])


@pytest.mark.parametrize(
    "method",
    [
        "augmented",
        "slm",
        "sslm",
        "recursive_lambda",
        "embedding",
        "rcr",
    ],
)
def test_parallelogram_next_to_its_flat_singularity_is_exact_or_singular(method):
    """1e-8 rad from flat the solve is ill-conditioned (~1e16): a method must raise or
    return the branch's exact acceleration q̈ = θ̈ t, θ̈ = tᵀ(τ - h) / tᵀ M t (q is
    linear in θ along the branch, so there is no curvature term)."""
    model, q = _parallelogram(1e-8)
    t = np.array([1.0, -1.0, 1.0])
    v, tau = 0.7 * t, np.array([1.0, 0.0, 0.0])
    for _ in range(2):  # the second call sees the workspace of the first
        try:
            qdd = ld.forward_dynamics(model, q, v, tau, method=method).qdd
        except ld.SingularityError:
            continue
        M, h = ld.crba(model, q), ld.nonlinear_effects(model, q, v)
        exact = t * (t @ (tau - h)) / (t @ M @ t)
        np.testing.assert_allclose(qdd, exact, rtol=1e-6, atol=1e-6 * np.abs(exact).max())


def test_four_bar_assembles_at_the_crank_angle_the_issue_names():
    model = ld.examples.four_bar()
    q = np.array(model.q0)
    q[0] = 2.230476980078138
    qa = ld.assemble(model, q)
    assert np.abs(ld.closure_residual(model, qa)).max() <= 1e-10


# --------------------------------------------------------------------------- census misses
# The silent misses of the seed-11 census (before iterative refinement in sslm and
# embedding): well-conditioned constraints (cond J M⁻¹ Jᵀ <= 5e5), mass ratios 5e4..8e5
# (cond(M) 5e6..2.4e8), errors 1.5e-8..1.1e-7.  Each is ``random_mechanism((11, i))``.
CENSUS_MISSES = [
    *(("sslm", i) for i in (3743, 4402, 7427, 7807)),
    *(("embedding", i) for i in (2074, 3518, 4402, 7427, 7807)),
]


@pytest.mark.parametrize(("method", "i"), CENSUS_MISSES)
def test_census_misses_are_refined_to_the_oracle(method, i):
    from loopdyn.methods.common import DIAG_EOM, DIAG_REFINED, EOM_TOL

    mech = mx.random_mechanism((CENSUS_SEED, i))
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well
    d = mech.model.create_data()
    res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau, method=method, data=d)
    assert res.method == method  # no fallback to augmented
    assert d.diag[DIAG_REFINED] >= 1  # the refinement ran ...
    assert mx.relative_error(res.qdd, o) <= mx.REL_TOL  # ... and reached the oracle
    if method == "embedding":  # whose refinement checks the equations of motion too
        assert d.diag[DIAG_EOM] <= EOM_TOL


# rcr's silent misses of the same census before its refinement: seven where the articulated
# pivots spread (mass ratios 5e4..8e5, cond(M) 1e6..1e7; errors 1.5e-8..8e-8, as
# embedding's) and 8731, whose best dependent coordinates still leave Y1 at a pivot ratio
# of 6.7e-5 (error 3.8e-6).  Each is refined to the oracle, its equations of motion
# checked; the cached workspace (after another state) gives the same answer.
RCR_CENSUS_MISSES = (1637, 3518, 4402, 5978, 7427, 7807, 8731, 9312)


@pytest.mark.parametrize("i", RCR_CENSUS_MISSES)
def test_rcr_census_misses_are_refined_to_the_oracle(i):
    from loopdyn.methods.common import DIAG_EOM, DIAG_REFINED, EOM_TOL

    mech = mx.random_mechanism((CENSUS_SEED, i))
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well
    d = mech.model.create_data()
    res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau, method="rcr", data=d)
    assert res.method == "rcr"  # no fallback to augmented
    assert d.diag[DIAG_REFINED] >= 1  # the refinement ran ...
    assert d.diag[DIAG_EOM] <= EOM_TOL  # ... its residual was checked ...
    assert mx.relative_error(res.qdd, o) <= mx.REL_TOL  # ... and it reached the oracle
    fresh = mx.judge(mech, "rcr", o, data=mech.model.create_data())
    assert fresh.kind == mx.AGREES
    rng = np.random.default_rng((CENSUS_SEED, i, 1))
    assert mx.same_answer(mech, "rcr", o, fresh, rng) == ""


# augmented's silent misses of the same census before its refinement: one LU solve of
# eq. (10) off by 1.6e-8..8.3e-8, cond J M⁻¹ Jᵀ 1e11..6e12, LU pivot ratios 2e-14..1e-11
# (below ``REFINE_LU_RATIO``).  Refined with the factors in hand, they reach the oracle.
AUGMENTED_CENSUS_MISSES = (2069, 3078, 6077, 6499)


@pytest.mark.parametrize("i", AUGMENTED_CENSUS_MISSES)
def test_augmented_census_misses_are_refined_to_the_oracle(i):
    from loopdyn.methods.common import DIAG_QUALITY, DIAG_REFINED, REFINE_LU_RATIO

    mech = mx.random_mechanism((CENSUS_SEED, i))
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent
    d = mech.model.create_data()
    res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau, method="augmented", data=d)
    assert res.method == "augmented"
    assert d.diag[DIAG_QUALITY] < REFINE_LU_RATIO
    assert d.diag[DIAG_REFINED] >= 1  # the refinement ran ...
    assert mx.relative_error(res.qdd, o) <= mx.REL_TOL  # ... and reached the oracle


# The mechanisms where ``ld.assemble`` stopped at a local minimum of |Φ|² (|Φ| ~ 1e-5..7e-2,
# often a singular configuration) from a guess within 0.1 of q*, before its restarts.
ASSEMBLY_MISSES = (1750, 2091, 2411, 2466, 2806, 4180, 4521, 6197, 6415, 6499, 6596, 6762,
                   8069, 8159, 8930)  # fmt: skip


@pytest.mark.parametrize("i", ASSEMBLY_MISSES)
def test_assembly_restarts_close_the_census_misses(i):
    """The guesses of ``mechanisms.census_case`` for case i of seed 11 (its rng first
    draws the other states of the cached-workspace checks, one per method)."""
    mech = mx.random_mechanism((CENSUS_SEED, i))
    rng = np.random.default_rng((CENSUS_SEED, i, 1))
    for _ in range(5):  # the census that found them ran five methods (rcr joined later)
        mx.other_state(mech, rng)
    failures = mx.check_assembly(mech, rng)
    assert not failures, "\n".join(failures)


def test_assembly_error_names_the_open_closure_after_the_restarts():
    """A loop that cannot close (a two-link arm whose tip is tied to a point out of its
    reach): every restart fails, and the error says which closure, by how much."""
    b = ld.ModelBuilder("short_arm", planar=True)
    b.add_body("l1", "ground", ld.Revolute("z"), mass=1.0, com=(0.5, 0, 0))
    b.add_body("l2", "l1", ld.Revolute("z"), xyz=(1, 0, 0), mass=1.0, com=(0.5, 0, 0))
    b.add_frame("tip", "l2", xyz=(1, 0, 0))
    b.add_frame("far", "ground", xyz=(3, 0, 0))
    b.add_closure("reach", "tip", "far", "revolute")
    model = b.build()
    with pytest.raises(
        ld.AssemblyError, match=r"closure 'reach' stays open by 1(\.0+)? .*restarts"
    ):
        ld.assemble(model, [0.1, 0.2], fixed=[])


# --------------------------------------------------------------------------- the census
@pytest.mark.slow
def test_census_of_ten_thousand_mechanisms():
    """Seed CENSUS_SEED, CENSUS_N mechanisms: no failure of any class (the table and
    reproducers: ``python benchmarks/random_census.py --n 10000 --seed 11 --shrink``)."""
    bad = mx.census_failures(mx.census(CENSUS_N, CENSUS_SEED))
    assert not bad, f"{len(bad)} failures, first: " + "\n".join(
        f"case {i}: {w}" for i, w in bad[:20]
    )


def _spatial_bodies(table):
    """A ModelBuilder with the bodies of ``table``: (name, parent, joint, xyz, rpy, mass,
    principal inertias), centres of mass at the body origins (seed 20261152's cases)."""
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81), planar=False)
    for name, parent, joint, xyz, rpy, mass, inertia in table:
        b.add_body(
            name, parent, joint, xyz=xyz, rpy=rpy, mass=mass, com=(0.0, 0.0, 0.0),
            inertia=np.diag(inertia),
        )  # fmt: skip
    return b


def _nearly_vacuous_ball_closure():
    """Hypothesis seed 20261152: three ball closures on a hinge's own centre (vacuous rows)
    and a fourth, c3, whose frames are 6.5e-12 m apart: J's third singular value is 1.5e-12,
    7.7e-13 of its largest."""
    b = _spatial_bodies((
        ("b0", "ground", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.07237962851379687, 0.08463138860574738, 0.15441490657471613)),  # noqa: E501
        ("b1", "b0", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 3.263574832662658, (0.5439291387771097, 0.2874994575565985, 0.2874994575565985)),  # noqa: E501
        ("b2", "b1", ld.Revolute('z'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.008098787639188074, 0.059192165700435895, 0.061803770824559984)),  # noqa: E501
        ("b3", "b2", ld.Spherical(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.030469652010819567, 0.0710957847051481, 0.08182284689750818)),  # noqa: E501
        ("b4", "b3", ld.Universal((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.08470290030134377, 0.033885546119279394, 0.11584931248460228)),  # noqa: E501
        ("b5", "b4", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.09720245194563243, 0.13428841228118882, 0.06482419756015458)),  # noqa: E501
        ("b6", "b5", ld.Revolute('z'), (0.7999999999999999, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.09023630228090786, 0.07903880183247604, 0.08958769831428683)),  # noqa: E501
        ("b7", "b6", ld.Revolute('z'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.023185863122688638, 0.024772685433183755, 0.04546976759314117)),  # noqa: E501
        ("b8", "b7", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.025579966028617958, 0.06881758107211981, 0.05736774893881019)),  # noqa: E501
        ("b9", "b8", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.012076853702080262, 0.047830880606300155, 0.05019821297709363)),  # noqa: E501
        ("b10", "b9", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 7.943282347242816, (0.15645575827544067, 0.20180639302151374, 0.2884767958229532)),  # noqa: E501
        ("b11", "b10", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.07607893815604608, 0.030288423813128604, 0.10462615232374918)),  # noqa: E501
        ("b12", "b11", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.017509218090157902, 0.0244740282011311, 0.0365766127701163)),  # noqa: E501
        ("b13", "b12", ld.Revolute((0.0, 1.0, 0.0)), (0.0, 0.0, 0.7338466882816118), (0.0, 0.0, 0.0), 1.0, (0.02186419667582215, 0.03565696487402825, 0.05442289878307605)),  # noqa: E501
        ("b14", "b12", ld.Revolute('x'), (0.0, 0.0, 0.0), (0.2585005745457516, 0.0, 0.0), 1.0, (0.11487711902232545, 0.03263775224117718, 0.0844272998855184)),  # noqa: E501
        ("b15", "b14", ld.Spherical(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.010597103285274648, 0.056317515167871285, 0.06207617142962691)),  # noqa: E501
        ("b16", "b14", ld.Spherical(), (0.0, 0.0, -6.503475590761972e-12), (0.0, 0.0, 0.0), 1.0, (0.03830264178377667, 0.02357965176493689, 0.05638965668550644)),  # noqa: E501
        ("b17", "b16", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.006850766077894709, 0.0618312216579825, 0.06820154389738373)),  # noqa: E501
        ("b18", "b17", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.037729206586651395, 0.07114818912108826, 0.10775368532232774)),  # noqa: E501
        ("b19", "b18", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.08670116131940517, 0.02282217282651708, 0.10278767817377857)),  # noqa: E501
        ("b20", "b19", ld.Revolute((0.0, 0.0, -1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.1473706575028752, 0.13978275057398118, 0.12048674141018972)),  # noqa: E501
    ))  # fmt: skip
    b.add_frame("c0_a", "b0", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c0_b",
        "b1",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    b.add_frame("c1_a", "ground", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c1_b",
        "b0",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c1", "c1_a", "c1_b", "ball")
    b.add_frame("c2_a", "b0", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c2_b",
        "b1",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c2", "c2_a", "c2_b", "ball")
    b.add_frame("c3_a", "b0", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c3_b",
        "b16",
        xyz=(0.7999999999999999, -2.2211707110209446e-28, 6.5034755907619726e-12),
        rotation=[
            [1.0, 0.0, 0.0],
            [0.0, 0.9667743647575424, -0.2556312337091272],
            [0.0, 0.2556312337091272, 0.9667743647575424],
        ],
    )
    b.add_closure("c3", "c3_a", "c3_b", "ball")
    q = np.array(
        [
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
        ]
    )
    model = b.build()
    return mx.Mechanism(model, q, np.zeros(model.nv), np.zeros(model.nv), [])


def test_a_small_row_that_is_not_rounding_makes_the_state_ambiguous():
    """c3's row is 7.7e-13 of J's scale (J's third singular value), below the judge's
    clean-redundancy gap GAP_RTOL = 1e-12, so the judge dropped it and called the state
    well conditioned at rank 2 (cond 5.6): every method, which keeps the row
    (``ld.constraint_rank``: 10 max(m, nv) ε σ_max = 5e-14 here) and answers at rank 3,
    was called silently wrong, 4.9e-2 of the scale from the rank-2 answer.  But the row's
    entries (6.5e-12) are not rounding: the rank-2 answer violates it by 1.3 % of its own
    size (the rank-3 answer was exact at its rank, the judge's rational check).  The
    judge now checks every row at its own scale before calling a redundancy clean: the
    state is ambiguous.  ``ld.constraint_rank`` now drops rows below ``RANK_FLOOR`` σ_max
    (1e-12, now 1e-11; kept, a row there made the solve singular in the next test's state):
    c3's row fails the dropped-row check at its own scale, a SingularityError from every
    method, which the judge accepts for an ambiguous state."""
    mech = _nearly_vacuous_ball_closure()
    s = ld.constraint_rank(mech.model, mech.q).singular_values
    assert 10 * 23 * np.finfo(float).eps < s[2] / s[0] < mx.GAP_RTOL
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent and not o.well and o.rank == 2
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.NAMED, (method, out)
        # the error names the closure whose dependent row fails (of c0 … c3's ten)
        assert "violates the rows of c3 that depend" in out.message, (method, out)


def _small_redundant_row():
    """Hypothesis seed 20261152, after the judge's fix: the same family, c3's row 9.9e-13
    of J's largest singular value, and the rank-2 answer satisfies it at its own scale."""
    b = _spatial_bodies((
        ("b0", "ground", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.07237962851379687, 0.08463138860574738, 0.15441490657471613)),  # noqa: E501
        ("b1", "b0", ld.Revolute((0.0, 0.0, -1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.026750174114800258, 0.0617360025435429, 0.0789660099916765)),  # noqa: E501
        ("b2", "b1", ld.Revolute('z'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.008098787639188074, 0.059192165700435895, 0.061803770824559984)),  # noqa: E501
        ("b3", "b2", ld.Spherical(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.030469652010819567, 0.0710957847051481, 0.08182284689750818)),  # noqa: E501
        ("b4", "b3", ld.Universal((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.08470290030134377, 0.033885546119279394, 0.11584931248460228)),  # noqa: E501
        ("b5", "b4", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.09720245194563243, 0.13428841228118882, 0.06482419756015458)),  # noqa: E501
        ("b6", "b5", ld.Revolute('z'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.09023630228090786, 0.07903880183247604, 0.08958769831428683)),  # noqa: E501
        ("b7", "b6", ld.Revolute('z'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.023185863122688638, 0.024772685433183755, 0.04546976759314117)),  # noqa: E501
        ("b8", "b7", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.025579966028617958, 0.06881758107211981, 0.05736774893881019)),  # noqa: E501
        ("b9", "b8", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.012076853702080262, 0.047830880606300155, 0.05019821297709363)),  # noqa: E501
        ("b10", "b9", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.01969661299144778, 0.02540591964373047, 0.03631707689744732)),  # noqa: E501
        ("b11", "b10", ld.Revolute((0.0, 0.0, 1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.07607893815604608, 0.030288423813128604, 0.10462615232374918)),  # noqa: E501
        ("b12", "b11", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.017509218090157902, 0.0244740282011311, 0.0365766127701163)),  # noqa: E501
        ("b13", "b12", ld.Revolute((0.0, 0.0, 1.0)), (0.6644358509274824, 0.0, 0.7338466882816118), (0.0, 0.0, 0.0), 1.0, (0.02186419667582215, 0.03565696487402825, 0.05442289878307605)),  # noqa: E501
        ("b14", "b12", ld.Revolute('x'), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.11487711902232545, 0.03263775224117718, 0.0844272998855184)),  # noqa: E501
        ("b15", "b14", ld.Spherical(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.010597103285274648, 0.056317515167871285, 0.06207617142962691)),  # noqa: E501
        ("b16", "b14", ld.Spherical(), (0.0, 0.0, -6.503475590761972e-12), (0.0, 0.0, 0.0), 1.0, (0.03830264178377667, 0.02357965176493689, 0.05638965668550644)),  # noqa: E501
        ("b17", "b16", ld.Revolute((0.0, 1.0, 0.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.006850766077894709, 0.0618312216579825, 0.06820154389738373)),  # noqa: E501
        ("b18", "b17", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.037729206586651395, 0.07114818912108826, 0.10775368532232774)),  # noqa: E501
        ("b19", "b18", ld.Fixed(), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.08670116131940517, 0.02282217282651708, 0.10278767817377857)),  # noqa: E501
        ("b20", "b19", ld.Revolute((0.0, 0.0, -1.0)), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0, (0.0640706575028752, 0.05648275057398117, 0.12048674141018972)),  # noqa: E501
    ))  # fmt: skip
    b.add_frame("c0_a", "b0", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c0_b",
        "b1",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    b.add_frame("c1_a", "ground", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c1_b",
        "b0",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c1", "c1_a", "c1_b", "ball")
    b.add_frame("c2_a", "b0", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c2_b",
        "b1",
        xyz=(0.0, 0.0, 0.0),
        rotation=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    )
    b.add_closure("c2", "c2_a", "c2_b", "ball")
    b.add_frame("c3_a", "b13", xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0))
    b.add_frame(
        "c3_b",
        "b16",
        xyz=(-0.6644358509274824, -0.18759413427878574, 0.709464165899385),
        rotation=[
            [-1.0, 0.0, 0.0],
            [0.0, -0.9667743647575424, -0.2556312337091272],
            [0.0, -0.2556312337091272, 0.9667743647575424],
        ],
    )
    b.add_closure("c3", "c3_a", "c3_b", "ball")
    q = np.array(
        [
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.2585005745457516,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
            0.0,
            -1.0,
            0.0,
            0.0,
        ]
    )
    model = b.build()
    return mx.Mechanism(model, q, np.zeros(model.nv), np.zeros(model.nv), [])


def test_a_small_row_that_holds_at_its_own_scale_is_dropped():
    """J's third singular value is 9.9e-13 of its largest: kept (10 max(m, nv) ε σ_max
    is 5e-14), it made every method's solve singular (cond 1.6e12: a SingularityError
    where the state is well conditioned at rank 2).  Below ``RANK_FLOOR`` σ_max (1e-12,
    now 1e-11) it is dropped, holds at its own scale, and every method agrees with the
    oracle."""
    mech = _small_redundant_row()
    info = ld.constraint_rank(mech.model, mech.q)
    s = info.singular_values
    assert info.rank == 2 and 10 * 23 * np.finfo(float).eps < s[2] / s[0] < 1e-12
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well and o.rank == 2
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.AGREES, (method, out)


def _data_case(name):
    """The mechanism (model, q, v, τ) of ``tests/data/<name>``, a reproducer file."""
    import runpy
    from pathlib import Path

    g = runpy.run_path(str(Path(__file__).parent / "data" / name))
    return mx.Mechanism(g["model"], g["q"], g["v"], g["tau"], [])


def test_a_stalled_refinement_on_a_near_dependence_is_a_named_error():
    """Seed 20261153: three closure rows of O(1) nearly dependent, J's last singular
    value 2e-11 of its largest (kept: above ``RANK_FLOOR``).  The oracle drops it (rank
    21) and calls the state ambiguous (gap 8.3e-12, above GAP_RTOL): an answer must be
    exact at the method's rank, or a named error.  Every method fell back to augmented,
    whose refinement stalled (corrections of 4e-3 on |q̈| = 22.6 that did not shrink) and
    was accepted against |φ|/min M_ii = 2.7e6: q̈ 2.3e-4 off the oracle and 1.0 of the
    scale off the exact rank-22 answer.  Now a named SingularityError from every method."""
    mech = _data_case("hypothesis_20261153.mech")
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent and not o.well and o.rank == 21
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.NAMED and "lost accuracy" in out.message, (method, out)


def test_augmented_refines_an_lu_pivot_ratio_above_eps():
    """Census seed 19, case 653 (shrunk, ``tests/data/census19_653.mech``): augmented's LU
    pivot ratio 5.9e-15 is below ``PIVOT_TOL`` (1e-14), where it raised 'is singular'
    while the five other methods agreed with the oracle to 1e-20 (cond J M⁻¹ Jᵀ 2.8e13).
    K's condition is at least ~1 / ratio and a refinement step contracts by ~eps cond(K),
    so a ratio above eps can be refined and judged: augmented refines (two steps) and
    agrees."""
    mech = _data_case("census19_653.mech")
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.consistent and not o.well and o.cond > 1e13
    for method in mx.METHODS:
        d = mech.model.create_data()
        out = mx.judge(mech, method, o, data=d)
        assert out.kind == mx.AGREES, (method, out)
        if method == "augmented":  # its LU pivot ratio, and it refined
            assert d.diag[0] < 1e-14 and d.diag[3] >= 1


def _ball_off_a_hinge_axis_by(y):
    """Three coaxial hinges and a ball closure between the first two bodies, its point
    ``y`` off their common axis: the closure locks their relative rotation with a lever
    of ``y`` (hypothesis seed 20261160: y = 2.2e-313 m, a subnormal row)."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Revolute("z"), **rod)
    b.add_body("b1", "b0", ld.Revolute("z"), **rod)
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_frame("c0_a", "b0", xyz=(0.0, y, 0.0))
    b.add_frame("c0_b", "b1", xyz=(0.0, y, 0.0))
    b.add_closure("c0", "c0_a", "c0_b", "ball")
    return b.build()


def test_a_subnormal_closure_row_is_dependent():
    """Seed 20261160: the closure's one row is 2.2e-313 (subnormal: bits lost, and no
    power of two brings it to 1 without overflowing its multiplier).  Every method's
    solve called it singular while the oracle, which kept it, called the state well
    conditioned (cond 1) at rest, and overflowed (a NaN, a crash of the judge) under
    joint forces, where λ would be ~1e312.  Rows below the normal range now count as
    dependent (``ld.constraint_rank``'s ``ABS_FLOOR``; the oracle alike): at rest the
    dropped row holds and every method agrees (q̈ = 0); under joint forces it does not,
    and every method raises a SingularityError naming the closure."""
    model = _ball_off_a_hinge_axis_by(2.2250738585e-313)
    q = v = np.zeros(3)
    info = ld.constraint_rank(model, q)
    assert info.rank == 0 and 0.0 < info.singular_values[0] < np.finfo(float).tiny
    mech = mx.Mechanism(model, q, v, np.zeros(3), [])
    o = mx.dense_oracle(model, q, v, mech.tau)
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=model.create_data())
        assert out.kind == mx.AGREES, (method, out)
    tau = np.array([0.3, -0.2, 0.1])
    o = mx.dense_oracle(model, q, v, tau)
    assert not o.well
    for method in mx.METHODS:
        with pytest.raises(ld.SingularityError, match=r"violates the rows of c0"):
            ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
    # a lever in the normal range is an exact constraint: the hinges turn together
    model = _ball_off_a_hinge_axis_by(1e-300)
    for method in mx.METHODS:
        res = ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
        assert res.rank == 1 and abs(res.qdd[1]) <= 1e-15 * np.abs(res.qdd).max()


def test_sslm_sees_gicm_pivots_that_spread_across_blocks():
    """Hypothesis seed 20261170: a universal, a skewed universal and three hinges on one
    axis line, closed by a one-row generic, a weld and a ball closure; 3 independent rows,
    cond J M⁻¹ Jᵀ 3e10.  SSLM's GICM is eliminated in 1×1 pivot blocks, each with
    det / Π diag = 1, which was its whole pivot ratio: no refinement, λ off and q̈
    1.2e-8 of the scale from every other method (silently).  Its ratio now also bounds
    the spread of the pivots across blocks (5.6e-11 here, SLM's Cholesky ratio alike):
    it refines and agrees."""
    rod = dict(mass=1.0, inertia=np.eye(3) / 6)
    b = ld.ModelBuilder("random", gravity=(0.0, 0.0, -9.81))
    b.add_body("b0", "ground", ld.Universal((1, 0, 0), (0, 1, 0)), mass=1.0,
               inertia=[[0.14842125530876488, -0.028415544588302553, 0.0],
                        [-0.028415544588302553, 0.12241207802456847, 0.0],
                        [0.0, 0.0, 0.10416666666666666]])  # fmt: skip
    b.add_body("b1", "b0", ld.Universal((0.9999999953721933, 9.620609837610673e-05, 0.0),
                                        (-9.32152837609261e-05, 0.9689124172267053,
                                         0.24740395925452294)),
               xyz=(0, 0, 0.5), **rod)  # fmt: skip
    b.add_body("b2", "b1", ld.Revolute("z"), **rod)
    b.add_body("b3", "b2", ld.Revolute("y"), **rod)
    b.add_body("b4", "b3", ld.Revolute("z"), **rod)
    b.add_body("b5", "b4", ld.Revolute("z"), **rod)
    tilt = [[1.0, 0.0, 2.3419586346110148e-17], [0.0, 1.0, 0.0], [2.3419586346110148e-17, 0.0, 1.0]]
    b.add_frame("c0_a", "b0")
    b.add_frame("c0_b", "b1", xyz=(-1.1709793173055074e-17, 0.0, -0.5), rotation=tilt)
    b.add_closure("c0", "c0_a", "c0_b", "generic", translation_axes=[], rotation_axes=[(0, 1, 0)])
    b.add_frame("c1_a", "b1")
    b.add_frame("c1_b", "b2", rotation=tilt)
    b.add_closure("c1", "c1_a", "c1_b", "weld")
    b.add_frame("c2_a", "b2", xyz=(0.5, 0.0, 0.0))
    b.add_frame("c2_b", "b0", xyz=(0.5, 0.0, 0.5), rotation=tilt)
    b.add_closure("c2", "c2_a", "c2_b", "ball")
    model = b.build()
    q = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    mech = mx.Mechanism(model, q, np.zeros(8), np.zeros(8), [])
    o = mx.dense_oracle(model, q, mech.v, mech.tau)
    assert o.rank == 3 and o.cond > 1e10
    for method in mx.METHODS:
        d = model.create_data()
        out = mx.judge(mech, method, o, data=d)
        assert out.kind == mx.AGREES, (method, out)
        if method == "sslm":  # its pivot ratio sees the spread, and it refined
            assert d.diag[0] < 1e-9 and d.diag[3] >= 1


def _every_method_names_the_violated_rows(name, closures):
    """The state of ``tests/data/<name>`` has no solution (the oracle: inconsistent), and
    every method raises the SingularityError naming the ``closures`` whose rows fail."""
    mech = _data_case(name)
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert not o.consistent
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.NAMED and f"violates the rows of {closures}" in out.message, out


def test_a_vacuous_dropped_row_is_checked_at_its_own_scale():
    """Seed 20261172 (``tests/data/hypothesis_20261172.mech``): c0's and c3's dropped rows
    are vacuous (|J_d| 6e-17) but their γ is 0.0101: no q̈ satisfies them.  Checked at the
    largest |J_d| of the dropped rows (0.84) times augmented's acceleration scale (1.5e6),
    they passed and every method answered, 0.0101 off those rows.  Each dropped row is
    now checked at its own scale: every method raises a SingularityError naming c0, c3."""
    _every_method_names_the_violated_rows("hypothesis_20261172.mech", "c0, c3")


def test_a_dropped_row_judged_at_an_overestimated_scale():
    """Hypothesis seed 20261172, second case: dropped rows of 0.40 (c0's and c3's) are
    violated by γ_d - C γ_k = 0.0046 (J_d = C J_k): the state has no solution.  They
    passed the dropped-row check at |J_d| times augmented's acceleration scale 1.76e6
    ((|φ| + |J||λ|)/min M_ii, a 1 g body) against |q̈| ~ 27, and every method answered.
    Every method must raise a SingularityError that names the closures."""
    _every_method_names_the_violated_rows("hypothesis_20261172b.mech", "c0, c3")


def test_dependent_rows_inconsistent_at_second_order():
    """Hypothesis seed 20261178: rows of c3 and c4 depend on kept rows (to 6e-16) but
    their γ does not (γ_d - C γ_k = 2.2e-5): no q̈ satisfies every row.  The violation,
    3.5e-9..5.5e-9 of the rows' scale, passed the dropped-row check at 1e-8 and every
    method answered; at the oracle's 1e-9 every method names c3 and c4."""
    _every_method_names_the_violated_rows("hypothesis_20261178.mech", "c3, c4")


def test_a_row_of_5e_12_that_holds_at_its_own_scale_is_dropped():
    """Hypothesis seed 20261184: J's third singular value 5.1e-12 of its largest.  Kept
    (above the former RANK_FLOOR of 1e-12) it made every method's solve singular, where
    the oracle calls the state well conditioned at rank 2; below RANK_FLOOR = 1e-11 it is
    dropped, holds at its own scale, and every method agrees with the oracle."""
    mech = _data_case("hypothesis_20261184.mech")
    info = ld.constraint_rank(mech.model, mech.q)
    s = info.singular_values
    assert info.rank == 2 and 1e-12 < s[2] / s[0] < 1e-11
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well and o.rank == 2
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.AGREES, (method, out)


def _every_method_agrees_with_the_oracle(case):
    """The stored case is well conditioned for the oracle and every method agrees with it."""
    mech = _data_case(case)
    o = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert o.well
    for method in mx.METHODS:
        out = mx.judge(mech, method, o, data=mech.model.create_data())
        assert out.kind == mx.AGREES, (method, out)


def test_an_inconsistency_below_the_oracles_threshold_is_answered():
    """Hypothesis seed 20261198: |γ_d - C γ_k| = 1.3e-9 of the dropped row's scale, which
    the oracle's least-squares answer spreads over every row (consistent, cond 6.9).  The
    dropped-row check holds an answer to 2e-9 (20 RESIDUAL_TOL): at 1e-9 every method
    raised SingularityError; at 1e-8 seed 20261178 (3.5e-9..5.5e-9, the oracle's 1.1e-9:
    no solution) was answered.  Every method agrees with the oracle."""
    _every_method_agrees_with_the_oracle("hypothesis_20261198.mech")


def test_an_inconsistency_the_oracle_spreads_is_answered():
    """Hypothesis seed 20261198, second case: one kept row of nine, a dropped row violated
    by 2.3e-9 of its scale (above the check's 2e-9) where the oracle's least-squares answer
    spreads the inconsistency and calls the state consistent (cond 1): every method raised
    SingularityError.  The state's own least-squares residual, each row at the
    accelerations the state carries (the free ones M⁻¹(τ - h) too, as the oracle's
    scale), now decides: consistent, and every method agrees."""
    _every_method_agrees_with_the_oracle("hypothesis_20261198b.mech")
