"""Imports every built-in detector and parser module so that each registers itself."""
