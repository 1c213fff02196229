"""Plots and animations of trajectories and mechanisms."""
