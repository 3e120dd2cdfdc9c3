from medic.recording import Recording
from tests.simulate.conftest import SMALL, Simulated


def tables(recording: Recording) -> list[object]:
    return [recording.logs, recording.gpu, recording.scheduler, recording.labels]


def test_same_seed_gives_identical_tables(simulated: Simulated) -> None:
    from medic.simulate import simulate

    first = simulated("xid79_cascade", 3, **SMALL)
    again = simulate("xid79_cascade", 3, **SMALL)
    for a, b in zip(tables(first), tables(again), strict=True):
        assert a.equals(b)  # type: ignore[attr-defined]
    assert first.meta == again.meta


def test_different_seed_gives_different_tables(simulated: Simulated) -> None:
    one = simulated("xid79_cascade", 3, **SMALL)
    other = simulated("xid79_cascade", 4, **SMALL)
    assert not one.gpu.equals(other.gpu)
    assert not one.logs.equals(other.logs)
    assert one.labels is not None and other.labels is not None
    assert one.labels.column("onset") != other.labels.column("onset")


def test_scenarios_with_the_same_seed_differ(simulated: Simulated) -> None:
    assert not simulated("oom", 5, **SMALL).gpu.equals(simulated("segfault", 5, **SMALL).gpu)
