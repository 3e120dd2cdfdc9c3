"""Imports every built-in detector and parser module so that each registers itself."""

import medic.detectors.crash
import medic.detectors.gpu_fault
import medic.detectors.hang
import medic.detectors.liveness
import medic.detectors.node_failure
import medic.detectors.signatures
import medic.detectors.straggler
import medic.parse.progress
import medic.parse.rank_timings  # noqa: F401
