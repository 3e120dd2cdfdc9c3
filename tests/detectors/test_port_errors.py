"""Stragglers found from InfiniBand port counters (``ib_errors``, ``ib_link_downed``), compared
between the nodes of a job, with no log line about the link."""

from __future__ import annotations

from typing import Any

from medic.detectors.straggler import StragglerDetector
from medic.testing.builders import at
from medic.timeutil import US
from tests.detectors.test_straggler import ONSET, job_slowing, link_down, slow_from_the_start
from tests.detectors.training import COMPUTE, GpuState, Job, run

BOOT = {"n1": (0, 1), "n2": (37, 2), "n3": (1_204, 1), "n4": (0, 3)}
"""(ib_errors, ib_link_downed) each node's ports counted before the job: link training at boot
leaves symbol errors and a link-down or two behind, different on every node."""


def ports(errors: dict[str, Any] | None = None, downed: dict[str, Any] | None = None) -> GpuState:
    """Each node's counters: its boot-time counts plus ``errors[node](t)``, ``downed[node](t)``."""

    def state(t: float, node: str, gpu: int) -> dict[str, Any]:
        boot_errors, boot_downed = BOOT[node]
        rise = (errors or {}).get(node)
        drops = (downed or {}).get(node)
        return COMPUTE | {
            "ib_errors": boot_errors + (int(rise(t)) if rise else 0),
            "ib_link_downed": boot_downed + (int(drops(t)) if drops else 0),
        }

    return state


def bad_cable(t: float) -> float:
    """Symbol errors at 25 a second and a link recovery a minute, from the job's start."""
    return 25 * t + t // 60


def test_a_node_whose_link_errors_climb_from_the_first_step_is_found_from_counters_alone() -> None:
    job = slow_from_the_start(ports({"n2": bad_cable}))
    assert not job.logs or all(r["source"] != "system" for r in job.logs)
    (found,) = run(StragglerDetector(), [job], 900)
    assert found.culprits == ("n2",)
    assert found.evidence["feature"] == "ib_errors_delta"
    assert "InfiniBand port errors" in found.summary and "since its first steps" in found.summary
    assert found.detected_at <= at(300)


def test_a_link_counting_errors_within_spec_from_the_first_step_is_no_straggler() -> None:
    # One symbol error a second: a bit error rate of about 5e-12 at 200 Gb/s, near the
    # specification's 1e-12 target, on one node of a job that runs at its usual pace.
    job = Job().start().steps(10, 900, every=2.6)
    job.telemetry(0, 900, ports({"n2": lambda t: t}))
    assert run(StragglerDetector(), [job], 900) == []


def test_a_job_of_two_nodes_still_has_a_peer() -> None:
    job = Job(nodes=("n1", "n2")).start().steps(10, 900, every=2.6)
    job.telemetry(0, 900, ports({"n2": bad_cable}))
    (found,) = run(StragglerDetector(), [job], 900)
    assert found.culprits == ("n2",)


def test_errors_that_begin_mid_job_name_the_node_once_the_job_slows() -> None:
    def degrading(t: float) -> float:
        return 25 * (t - ONSET) if t >= ONSET else 0

    (found,) = run(StragglerDetector(), [job_slowing(1.3, ports({"n4": degrading}))], 1000)
    assert found.culprits == ("n4",) and "InfiniBand port errors" in found.summary
    assert (found.detected_at - at(ONSET)) / US <= 180


def test_errors_that_begin_mid_job_without_a_slowdown_are_no_straggler() -> None:
    def degrading(t: float) -> float:
        return 25 * (t - ONSET) if t >= ONSET else 0

    assert run(StragglerDetector(), [job_slowing(1.0, ports({"n4": degrading}))], 1000) == []


def test_errors_rising_on_every_node_alike_flag_none() -> None:
    everywhere = dict.fromkeys(("n1", "n2", "n3", "n4"), bad_cable)
    assert run(StragglerDetector(), [slow_from_the_start(ports(everywhere))], 900) == []


def test_boot_time_counts_and_one_retraining_are_no_straggler() -> None:
    # One link retraining mid-job (a switch firmware update, a reseated cable): the port goes
    # down once and counts a burst of symbol errors while it trains, then stays clean.
    def retrained(t: float) -> float:
        return 180 if t >= 300 else 0

    def once(t: float) -> float:
        return 1 if t >= 300 else 0

    job = slow_from_the_start(ports({"n3": retrained}, {"n3": once}))
    assert run(StragglerDetector(), [job], 900) == []


def test_link_drops_counted_by_the_port_name_the_node_without_log_lines() -> None:
    def flapping(t: float) -> float:
        return (t >= 200) + (t >= 420)

    (found,) = run(StragglerDetector(), [slow_from_the_start(ports(downed={"n2": flapping}))], 900)
    assert found.culprits == ("n2",) and "InfiniBand link drops" in found.summary
    assert found.evidence["feature"] == "ib_link_downed_delta"
    assert at(420) <= found.detected_at <= at(480)


def test_a_switch_retraining_every_link_twice_is_no_nodes_flapping() -> None:
    def twice(t: float) -> float:
        return (t >= 200) + (t >= 420)

    everywhere = dict.fromkeys(("n1", "n2", "n3", "n4"), twice)
    assert run(StragglerDetector(), [slow_from_the_start(ports(downed=everywhere))], 900) == []


def test_a_drop_both_logged_and_counted_counts_once() -> None:
    def once(t: float) -> float:
        return 1 if t >= 200 else 0

    job = slow_from_the_start(ports(downed={"n2": once}))
    link_down(job, 200, "n2")
    job.logs.sort(key=lambda r: r["time"])
    assert run(StragglerDetector(), [job], 900) == []


def test_an_old_recording_without_the_columns_behaves_as_before() -> None:
    job = slow_from_the_start(lambda t, node, gpu: COMPUTE)
    for row in job.gpu:
        assert "ib_errors" not in row
    assert run(StragglerDetector(), [job], 900) == []


def test_a_switch_retraining_seen_a_window_apart_and_one_later_drop_are_no_flapping() -> None:
    # Each node's exporter is scraped at its own phase: the switch's retraining at 200 s
    # shows on n1..n3 in one window and on n4 in the next; n4's own port drops once more later.
    def retrained(t: float) -> float:
        return t >= 200

    def retrained_late_then_once(t: float) -> float:
        return (t >= 215) + (t >= 500)

    downed = dict.fromkeys(("n1", "n2", "n3"), retrained) | {"n4": retrained_late_then_once}
    assert run(StragglerDetector(), [slow_from_the_start(ports(downed=downed))], 900) == []


def test_a_node_that_keeps_flapping_after_a_switch_retraining_is_named() -> None:
    def retrained(t: float) -> float:
        return t >= 200

    def flapping(t: float) -> float:
        return (t >= 215) + (t >= 500) + (t >= 640)

    downed = dict.fromkeys(("n1", "n2", "n3"), retrained) | {"n4": flapping}
    (found,) = run(StragglerDetector(), [slow_from_the_start(ports(downed=downed))], 900)
    assert found.culprits == ("n4",) and at(640) <= found.detected_at <= at(700)
