"""The built-in parsers: the one list that ``medic.parse.registry`` registers. A new built-in
is added here; its module imports no registry."""

from medic.parse.failed_ranks import FailedRankParser
from medic.parse.gpu_latest import GpuLatestParser
from medic.parse.progress import ProgressParser
from medic.parse.rank_timings import RankTimingParser
from medic.parse.signatures import SignatureParser

PARSERS: tuple[type, ...] = (
    GpuLatestParser,
    SignatureParser,
    ProgressParser,
    RankTimingParser,
    FailedRankParser,
)
