"""Structural analysis of a model's graph: subsystems and loops (SSLM), cut choice.

``ld.topology.topology(model)`` and the functions of ``loopdyn.topology.mechanism``
are re-exported here.
"""

from loopdyn.topology.mechanism import (
    CutChoice,
    Loop,
    MechanismGraph,
    Subsystem,
    Topology,
    build_mechanism,
    choose_cuts,
    elimination_order,
    incidence,
    loops,
    mechanism_graph,
    recut,
    roman,
    subsystems,
    topology,
)

__all__ = [
    "CutChoice",
    "Loop",
    "MechanismGraph",
    "Subsystem",
    "Topology",
    "build_mechanism",
    "choose_cuts",
    "elimination_order",
    "incidence",
    "loops",
    "mechanism_graph",
    "recut",
    "roman",
    "subsystems",
    "topology",
]
