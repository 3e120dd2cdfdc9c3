"""The built-in detectors: the one list that ``medic.detectors.registry`` registers (the
built-in parsers are ``medic.parse.builtin``'s). A new built-in is added here; its module
imports no registry."""

from medic.detectors.crash import CrashDetector
from medic.detectors.gpu_fault import GpuFaultDetector
from medic.detectors.hang import HangDetector
from medic.detectors.nan_divergence import NanDivergenceDetector
from medic.detectors.node_failure import NodeFailureDetector
from medic.detectors.straggler import StragglerDetector

DETECTORS: tuple[type, ...] = (
    CrashDetector,
    GpuFaultDetector,
    HangDetector,
    NanDivergenceDetector,
    NodeFailureDetector,
    StragglerDetector,
)
