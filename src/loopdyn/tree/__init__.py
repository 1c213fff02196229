"""O(n) algorithms on the spanning tree: ``rnea``, ``crba``, ``aba``, ``nonlinear_effects``.

The kernels are in ``loopdyn.tree.aba``, ``.rnea``, ``.crba``; the public functions
and their compiled entries in ``loopdyn.tree.algorithms`` (see there why).  The
entries are re-exported here for loopdyn.batch, loopdyn.analysis.inverse and the tests.
"""

from loopdyn.tree.algorithms import (  # noqa: F401
    _DONE,
    ABA,
    ABA0,
    CRBA,
    RNEA,
    RNEA0,
    aba,
    aba0_entry,
    aba_entry,
    crba,
    crba_entry,
    nonlinear_effects,
    rnea,
    rnea0_entry,
    rnea_entry,
)

__all__ = ["aba", "crba", "nonlinear_effects", "rnea"]
