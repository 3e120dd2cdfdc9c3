"""The built-in detectors and parsers: the one list of each that ``medic.detectors.registry``
registers. A new built-in is added here; its module imports no registry."""

from medic.detectors.crash import CrashDetector
from medic.detectors.gpu_fault import GpuFaultDetector
from medic.detectors.hang import HangDetector
from medic.detectors.liveness import GpuLatestParser
from medic.detectors.node_failure import NodeFailureDetector
from medic.detectors.signatures import SignatureParser
from medic.detectors.straggler import StragglerDetector
from medic.parse.progress import ProgressParser
from medic.parse.rank_timings import RankTimingParser

DETECTORS: tuple[type, ...] = (
    CrashDetector,
    GpuFaultDetector,
    HangDetector,
    NodeFailureDetector,
    StragglerDetector,
)
PARSERS: tuple[type, ...] = (GpuLatestParser, SignatureParser, ProgressParser, RankTimingParser)
