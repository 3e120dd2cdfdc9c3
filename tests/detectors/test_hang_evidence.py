"""What a silent job's telemetry says: evidence kept over the silence."""

from __future__ import annotations

import polars as pl
from river import stats

from medic.detectors.hang import HangConfig
from medic.detectors.hang_evidence import EVIDENCE_COLUMNS, NO_TELEMETRY, JobTelemetry, verdict
from medic.testing.builders import at
from medic.timeutil import US


def test_counter_rises_add_up_over_the_silence_whichever_gpus_each_window_holds() -> None:
    telemetry = JobTelemetry(power=stats.RollingQuantile(q=0.5, window_size=10))
    config = HangConfig()

    def window(*rises: tuple[str, int, int]) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "node": [n for n, _, _ in rises],
                "gpu": pl.Series([g for _, g, _ in rises], dtype=pl.Int16),
                "util": [100.0] * len(rises),
                "power_w": [100.0] * len(rises),
                **{c: [r for _, _, r in rises] for c in EVIDENCE_COLUMNS},
            }
        )

    telemetry.observe_silence(window(("a", 0, 1), ("a", 1, 0)), at(10), config)
    telemetry.observe_silence(window(("a", 0, 2), ("a", 1, 0)), at(20), config)
    telemetry.observe_silence(window(("a", 1, 5)), at(30), config)  # a GPU missing
    telemetry.observe_silence(window(("a", 0, 1), ("a", 1, 1)), at(40), config)
    assert telemetry.since is not None
    assert telemetry.since.select("node", "gpu", "pcie_replay_delta").rows() == [
        ("a", 0, 4),
        ("a", 1, 6),
    ]


def test_gpus_missing_from_a_window_keep_their_latest_values_for_carry_s() -> None:
    telemetry = JobTelemetry(power=stats.RollingQuantile(q=0.5, window_size=10))
    config = HangConfig(carry_s=15.0)

    def window(*gpus: tuple[int, float]) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "node": ["a"] * len(gpus),
                "gpu": pl.Series([g for g, _ in gpus], dtype=pl.Int16),
                "util": [u for _, u in gpus],
                "power_w": [100.0] * len(gpus),
                **{c: [0] * len(gpus) for c in EVIDENCE_COLUMNS},
            }
        )

    def latest() -> list[tuple[int, float, int]]:
        assert telemetry.latest is not None
        return telemetry.latest.select("gpu", "util", "seen_at").rows()

    telemetry.observe_silence(window((0, 1.0), (1, 2.0)), at(10), config)
    telemetry.observe_silence(window((0, 3.0), (1, 4.0)), at(20), config)  # the same GPUs
    assert latest() == [(0, 3.0, at(20)), (1, 4.0, at(20))]
    telemetry.observe_silence(window((1, 5.0)), at(30), config)
    assert latest() == [(0, 3.0, at(20)), (1, 5.0, at(30))]
    telemetry.observe_silence(window((1, 6.0), (2, 7.0)), at(40), config)
    assert latest() == [(1, 6.0, at(40)), (2, 7.0, at(40))]  # GPU 0: unseen past carry_s


def _gpus(nodes: list[str], util: float, power: float) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node": nodes,
            "gpu": pl.Series([0] * len(nodes), dtype=pl.Int16),
            "util": [util] * len(nodes),
            "power_w": [power] * len(nodes),
            **{c: [0] * len(nodes) for c in EVIDENCE_COLUMNS},
        }
    )


def test_a_run_of_every_gpu_spinning_holds_while_a_node_is_missing_for_a_while() -> None:
    telemetry = JobTelemetry(power=stats.RollingQuantile(q=0.5, window_size=10))
    config = HangConfig(carry_s=15.0)
    telemetry.snapshot(_gpus(["a", "b"], 100.0, 600.0), at(0), config)  # healthy, at work
    assert telemetry.known() == {"a", "b"}
    telemetry.observe_silence(_gpus(["a"], 100.0, 200.0), at(10), config)
    assert telemetry.all_spinning_since is None  # a run opens on every node only
    telemetry.observe_silence(_gpus(["a", "b"], 100.0, 200.0), at(20), config)
    opened = telemetry.all_spinning_since
    assert opened is not None
    # node b's exporter restarts: missing past carry_s, neither an end nor a sign it goes on
    for end in (30, 40, 50):
        telemetry.observe_silence(_gpus(["a"], 100.0, 200.0), at(end), config)
    telemetry.observe_silence(_gpus(["a", "b"], 100.0, 200.0), at(60), config)
    assert telemetry.all_spinning_since == opened
    # a GPU back at work ends it
    telemetry.observe_silence(_gpus(["a", "b"], 100.0, 600.0), at(70), config)
    assert telemetry.all_spinning_since is None


def test_the_latest_window_stays_recent_for_the_clusters_telemetry_spacing() -> None:
    telemetry = JobTelemetry(power=stats.RollingQuantile(q=0.5, window_size=10))
    config = HangConfig()  # 10 s windows
    telemetry.snapshot(_gpus(["a"], 100.0, 600.0), at(0), config)
    telemetry.observe_silence(_gpus(["a"], 100.0, 200.0), at(10), config)
    assert verdict(telemetry, at(25), config) == "spinning"
    # two windows later, a node scraped every few seconds has gone quiet ...
    assert verdict(telemetry, at(35), config) == NO_TELEMETRY
    # ... one scraped once a minute is not due yet
    assert verdict(telemetry, at(65), config, spacing_us=60 * US) == "spinning"
    assert verdict(telemetry, at(85), config, spacing_us=60 * US) == NO_TELEMETRY
