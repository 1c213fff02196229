"""The two other spatial ladders of Anderson & Critchley's Fig. 9 (Sec. 4.3): N = 2L + 1
bodies with two coordinates each on Hooke's (universal) joints, n = 4L + 2, m = 4L,
2 DOF, L coupled loops.  (``spatial_ladder`` is the catalog's third: rungs on revolute
joints closed by balls, n = 3L + 2, m = 3L.)  The paper gives the counts, not the
dimensions (its figure is not in our copy); these are our reading.

- ``hooke_ladder(L)``: ``spatial_ladder``'s geometry (``spatial_ladder_geometry``:
  posts of lengths h_k from pivots G_k, rungs of lengths c_k reaching the next post's
  lower end), 2/(L+1) kg posts on Hooke's joints (x then y), 1/L kg rungs on Hooke's
  joints at the posts' lower ends (y, the rung's pitch, then z, its yaw), each rung's
  tip meeting the next post's lower end in a universal closure (rung z, post y: 3
  translations and the rotation about their cross product), 4 rows per loop.
  (Hooke's joints at both ends of a parallelogram of equal posts make a singular
  mechanism, cond(J M^-1/2) ~ 1e13, and axes along the rung at both of its ends let it
  spin idly: neither is used.)
- ``pendulum_ladder(L)``: 2L + 1 equal pendulums (3/(2L+1) kg rods of length ``H``) hang
  from (jC/2, ±W/2, 0), alternately on the ladder's two rails, on Hooke's joints (x then
  y); neighbours j − 1 and j are held parallel by a closure of two rotation rows (about
  x and y of pendulum j − 1's lower end: the rungs as orientation couplings, a hinge
  about z left), 2 rows each, 4 per cell of two pendulums.  Every pendulum keeps
  pendulum 0's orientation, so, with the mass divided among them, every L moves like
  one 3 kg pendulum, ``fig9_pendulum()`` — the paper's Fig. 10 point that the ladders
  "through appropriate selection of inertia properties" share the independent
  trajectories of an equivalent 2-DOF spatial pendulum.

``q0``: assembled from the posts or pendulums hanging straight down.
"""

import numpy as np

from loopdyn.examples.params import assembled, parameters
from loopdyn.examples.shapes import rod
from loopdyn.model import ModelBuilder, Universal

H = 1.0  # pendulum length (m)
C = 0.6  # pivot spacing of the pendulums of one rail (m)
W = 0.4  # distance between the pendulum ladder's two rails (m)
POSTS_KG, RUNGS_KG, PENDULUMS_KG = 2.0, 1.0, 3.0  # totals, whatever L


@parameters(L=("count", "number of loops (rungs)"))
def hooke_ladder(L=4):
    """Fig. 9 ladder with Hooke's-joint rungs closed by universal joints (module
    docstring): N = 2L + 1 bodies, n = 4L + 2, m = 4L, 2 DOF (post 0 actuated)."""
    from loopdyn.examples.ladders import spatial_ladder_geometry

    L = _count(L)
    G, h, c = spatial_ladder_geometry(L)
    b = ModelBuilder(f"hooke_ladder_{L}", gravity=(0.0, 0.0, -9.81))
    for k in range(L + 1):
        b.add_body(f"post{k}", "ground", Universal("x", "y"), xyz=G[k], actuated=k == 0,
                   **rod(POSTS_KG / (L + 1), h[k], "-z"))  # fmt: skip
        b.add_frame(f"post{k}_end", f"post{k}", xyz=(0.0, 0.0, -h[k]))
        if k < L:
            b.add_body(f"rung{k}", f"post{k}", Universal("y", "z"), xyz=(0.0, 0.0, -h[k]),
                       **rod(RUNGS_KG / L, c[k], "x"))  # fmt: skip
            b.add_frame(f"rung{k}_tip", f"rung{k}", xyz=(c[k], 0.0, 0.0))
    for k in range(L):
        b.add_closure(f"loop{k}", f"rung{k}_tip", f"post{k + 1}_end", "universal",
                      axis=(0.0, 0.0, 1.0), axis2=(0.0, 1.0, 0.0))  # fmt: skip
    model = b.build()
    lower = G - h[:, None] * np.array([0.0, 0.0, 1.0])
    guess = model.neutral()
    for k in range(L):  # each rung pitched toward the next post's lower end
        d = lower[k + 1] - lower[k]
        guess[model.q_slice(f"rung{k}").start] = np.arctan2(-d[2], d[0])
    return assembled(model, guess, f"Fig. 9 spatial ladder with Hooke's-joint rungs, L = {L}")


@parameters(L=("count", "number of cells (two pendulums each)"))
def pendulum_ladder(L=4):
    """Fig. 9 ladder of 2L + 1 Hooke's-joint pendulums held parallel by their neighbours
    (module docstring): n = 4L + 2, m = 4L, 2 DOF (pendulum 0 actuated)."""
    L = _count(L)
    b = ModelBuilder(f"pendulum_ladder_{L}", gravity=(0.0, 0.0, -9.81))
    for j in range(2 * L + 1):
        y = W / 2 if j % 2 else -W / 2
        b.add_body(f"pendulum{j}", "ground", Universal("x", "y"), xyz=(j * C / 2, y, 0.0),
                   actuated=j == 0, **rod(PENDULUMS_KG / (2 * L + 1), H, "-z"))  # fmt: skip
        b.add_frame(f"pendulum{j}_end", f"pendulum{j}", xyz=(0.0, 0.0, -H))
    for j in range(1, 2 * L + 1):
        b.add_closure(f"rung{j}", f"pendulum{j - 1}_end", f"pendulum{j}_end", "generic",
                      rotation_axes=[(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)])  # fmt: skip
    return _finish(b.build(), f"Fig. 9 ladder of {2 * L + 1} parallel Hooke pendulums")


def fig9_pendulum():
    """The 2-DOF spatial pendulum every ``pendulum_ladder(L)`` moves like: a 3 kg rod of
    length ``H`` on a Hooke's joint (x then y), whose q1, q2 are the ladders' (the
    paper's Fig. 10 comparison with AUTOLEV's pendulum)."""
    b = ModelBuilder("fig9_pendulum", gravity=(0.0, 0.0, -9.81))
    b.add_body("pendulum", "ground", Universal("x", "y"), actuated=True,
               **rod(PENDULUMS_KG, H, "-z"))  # fmt: skip
    model = b.build()
    model.description = "equivalent 2-DOF pendulum of the Fig. 9 pendulum ladders"
    return model


def _count(L):
    if int(L) < 1:
        raise ValueError("a ladder needs L >= 1")
    return int(L)


def _finish(model, description):
    return assembled(model, model.neutral(), description)
