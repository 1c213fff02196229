"""One module per forward-dynamics formulation; each exposes ``run`` (see dynamics.RUNNERS)."""
