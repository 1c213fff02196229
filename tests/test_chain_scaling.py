"""Per-call work linear in the number of loops (issue 41): a structural check, no timing.

On ``four_bar_chain(N)`` every loop's root is the previous four-bar's crank, at depth
N − 1 for the last loop.  The closure kinematics used to write the lever p_B − o_j of
every loop for every body from its root down to the ground (``closure_levers``), and the
dense J read them: O(depth) per loop, O(N²) per call, the super-linear term that made
``embedding`` and ``rcr`` cost 2.16× → 4.40× ``ld.aba`` from N = 16 to 512.  The levers
are now written on each loop's own bodies and its root only, and read nowhere else.

The check: fill the lever workspace ``Data.lev`` (nc × nb × 3) with NaN, run every
method that reads it, and count the entries written.  The count must be exactly the
loops' own bodies (4N − 1 on the chain: linear in N, independent of depth), and the
answers must stay exact: a NaN lever read anywhere would reach q̈ or λ.
"""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import consistent_state

METHODS = ("embedding", "rcr", "augmented", "recursive_lambda")


def loop_bodies(model):
    """The bodies whose lever each closure needs: those on the paths from its two bodies
    up to their nearest common ancestor c, and c itself (a body, not the ground), for
    couplings too (between the coupled joints' bodies).  Total count over the closures."""
    parent = model.parent

    def up(j):
        out = []
        while j >= 0:
            out.append(int(j))
            j = parent[j]
        return out

    count = 0
    for k in range(model.nc):
        ua, ub = up(int(model.cl_body[k, 0])), up(int(model.cl_body[k, 1]))
        common = set(ua) & set(ub)
        c = max(common) if common else -1  # parents are numbered before their children
        count += len(set(ua) ^ set(ub)) + (c >= 0)
    return count


def levers_written(model, state, methods=METHODS):
    """(entries of Data.lev written by the methods' calls, {method: result}); the
    workspace starts as NaN so that an entry read before it is written shows."""
    q, v, tau = state
    d = ld.Data(model)
    for m in methods:  # bind first: a dense method re-allocates the workspace
        ld.forward_dynamics(model, q, v, tau, method=m, data=d)
    d.lev[...] = np.nan
    out = {m: ld.forward_dynamics(model, q, v, tau, method=m, data=d) for m in methods}
    return int(np.isfinite(d.lev).all(axis=2).sum()), out


@pytest.mark.parametrize("N", [2, 8, 32])
def test_four_bar_chain_levers_grow_linearly(N):
    model = ld.examples.four_bar_chain(N)
    state = consistent_state(model, np.random.default_rng(N))
    written, out = levers_written(model, state)
    # loop 0 closes through the ground (coupler 0, crank 0, rocker 0); loop k > 0 on
    # crank k - 1 (coupler k, crank k, rocker k and the root crank k - 1)
    assert written == loop_bodies(model) == 4 * N - 1
    exact = out["augmented"]
    scale = max(1.0, np.abs(exact.qdd).max())
    for m, res in out.items():
        assert res.method == m
        assert np.abs(res.qdd - exact.qdd).max() <= 1e-10 * scale, m
        lam_scale = max(1.0, np.abs(exact.lam).max())
        assert np.abs(res.lam - exact.lam).max() <= 1e-9 * lam_scale, m


@pytest.mark.parametrize(
    "name, kw",
    [
        ("four_bar_cut", {}),
        ("carpet_scraper", {}),
        ("excavator", {}),
        ("spatial_ladder", {"L": 3}),
        ("closed_knee_leg", {}),
        ("delta", {}),
        ("geared_chain", {"N": 3}),
    ],
)
def test_levers_only_on_the_loops_and_never_read_elsewhere(name, kw):
    """Loops on the ground, on a body (terminal and internal cuts), merged aggregated
    bodies whose members lie above a loop's root, couplings: the levers written are the
    loops' own, and each method's answer (with NaN everywhere else) is the oracle's."""
    model = ld.examples.get(name, **kw)
    state = consistent_state(model, np.random.default_rng(5))
    ref = ld.forward_dynamics(model, *state, method="augmented")
    written, out = levers_written(model, state)
    assert written == loop_bodies(model)
    scale = max(1.0, np.abs(ref.qdd).max())
    for m, res in out.items():
        assert res.method == m
        assert np.abs(res.qdd - ref.qdd).max() <= 1e-10 * scale, m
