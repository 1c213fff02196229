"""Analytic derivatives of tree and closed-loop dynamics (issue 40).

``tree``: tangent (forward-mode) spatial algebra of the RNEA in world axes;
``closed``: implicit differentiation of the KKT system of closed-loop forward dynamics
and of the closed-loop inverse dynamics;
``step``: one step of ``ld.simulate``'s fixed-step RK4 with its projection.
See docs/derivatives.md.
"""

from loopdyn.derivatives.closed import (
    ForwardDynamicsDerivatives,
    InverseDynamicsDerivatives,
    aba_derivatives,
    forward_dynamics_derivatives,
    inverse_dynamics_derivatives,
    rnea_derivatives,
)
from loopdyn.derivatives.step import StepDerivatives, step_derivatives

__all__ = [
    "ForwardDynamicsDerivatives",
    "InverseDynamicsDerivatives",
    "StepDerivatives",
    "aba_derivatives",
    "forward_dynamics_derivatives",
    "inverse_dynamics_derivatives",
    "rnea_derivatives",
    "step_derivatives",
]
