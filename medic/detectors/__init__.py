"""Detectors (one module per kind), the signature catalogue and root-cause attribution."""
