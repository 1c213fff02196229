"""Ladder mechanisms of DESIGN.md: spatial (Anderson & Critchley Sec. 4.3 spirit)."""

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.shapes import rod
from loopdyn.model import ModelBuilder, Revolute, Universal


def spatial_ladder_geometry(L):
    """Ground pivots G_k (L+1, 3), post lengths h_k (L+1,) and rung lengths c_k (L,)."""
    k = np.arange(L + 1, dtype=float)
    G = np.stack([k, 0.05 * np.sin(1.3 * k), 0.05 * np.cos(0.7 * k)], axis=1)
    h = 1.0 + 0.2 * np.sin(0.9 * k + 0.3)
    lower = G - h[:, None] * np.array([0.0, 0.0, 1.0])
    c = np.linalg.norm(lower[1:] - lower[:-1], axis=1)
    return G, h, c


@parameters(L=("count", "number of rungs (loops)"))
def spatial_ladder(L=4):
    """The spatial ladder of DESIGN.md: ``spatial_ladder_tree(L)`` closed by L balls.

    Loop k is closed by a ball joint between the tip of rung k (frame A) and the
    lower end of post k+1 (frame B).  n = 3L + 2 coordinates, m = 3L rows, 2 DOF
    (post 0's universal joint actuated).  ``q0``: assembled with post 0 hanging.
    """
    return _ladder(L, closed=True)


@parameters(L=("count", "number of rungs"))
def spatial_ladder_tree(L=4):
    """Spanning tree of ``spatial_ladder(L)``: L+1 posts and L rungs, n = 3L + 2.

    Post k (2 kg) hangs along -z from G_k on a universal joint (axes x then y);
    rung k (1 kg) hangs on a revolute joint (axis y) at the lower end of post k and
    lies along +x.  Frames ``post<k>_end`` (lower end of post k) and ``rung<k>_tip``
    are where the ball closures of loop k act.  Bodies are ordered post 0, rung 0,
    post 1, rung 1, ..., post L.
    """
    return _ladder(L, closed=False)


def _ladder(L, closed):

    if int(L) < 1:
        raise ValueError("spatial_ladder needs L >= 1")
    G, h, c = spatial_ladder_geometry(L)
    name = f"spatial_ladder_{L}" if closed else f"spatial_ladder_tree_{L}"
    b = ModelBuilder(name, gravity=(0.0, 0.0, -9.81))
    for k in range(L + 1):
        b.add_body(
            f"post{k}",
            "ground",
            Universal("x", "y"),
            xyz=G[k],
            actuated=k == 0,
            **rod(2.0, h[k], "-z"),
        )
        b.add_frame(f"post{k}_end", f"post{k}", xyz=(0.0, 0.0, -h[k]))
        if k < L:
            b.add_body(
                f"rung{k}", f"post{k}", Revolute("y"), xyz=(0.0, 0.0, -h[k]), **rod(1.0, c[k], "x")
            )
            b.add_frame(f"rung{k}_tip", f"rung{k}", xyz=(c[k], 0.0, 0.0))
    if not closed:
        model = b.build()
        model.description = f"spanning tree of the spatial ladder, L = {L}"
        return model
    for k in range(L):
        b.add_closure(f"loop{k}", f"rung{k}_tip", f"post{k + 1}_end", "ball")
    model = b.build()
    # guess: posts hanging, each rung turned about y toward the next post's lower end
    lower = G - h[:, None] * np.array([0.0, 0.0, 1.0])
    guess = model.neutral()
    for k in range(L):
        d = lower[k + 1] - lower[k]
        guess[model.q_slice(f"rung{k}")] = np.arctan2(-d[2], d[0])
    return assembled(model, guess, f"spatial ladder, L = {L} loops")
