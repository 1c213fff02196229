"""Analyses on top of the dynamics: assembly, closed-loop inverse dynamics, energy, motions."""
