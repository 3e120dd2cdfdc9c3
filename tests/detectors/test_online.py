import polars as pl
import pytest

from medic.detectors.online import KOfN, QuantileScorer, flag_count, peer_z, push_flags


def test_quantile_scorer_has_no_opinion_during_grace_and_scores_before_learning() -> None:
    scorer = QuantileScorer(q=0.99, window=100, grace=3)
    for gap in (1.0, 1.1):
        assert scorer.score(gap) is None
        scorer.learn(gap)
    assert not scorer.ready
    scorer.learn(0.9)
    assert scorer.ready
    reference = scorer.reference
    assert reference == pytest.approx(1.1, abs=0.01)
    assert scorer.score(5.5) == pytest.approx(5.5 / reference)
    assert scorer.reference == reference  # scoring never learns


def test_quantile_scorer_window_forgets_old_values_and_respects_its_floor() -> None:
    scorer = QuantileScorer(q=0.5, window=3, grace=1, floor=2.0)
    for value in (10.0, 10.0, 10.0, 1.0, 1.0, 1.0):
        scorer.learn(value)
    assert scorer.reference == 2.0


def test_k_of_n_needs_k_flags_among_the_last_n() -> None:
    votes = KOfN(k=2, n=3)
    assert [votes.push(f) for f in (True, False, False, True, True, False, False)] == [
        False,
        False,
        False,
        False,
        True,
        True,
        False,
    ]
    with pytest.raises(ValueError):
        KOfN(k=4, n=3)


def test_peer_z_is_robust_per_group_with_a_floor() -> None:
    frame = pl.DataFrame(
        {
            "job": ["a"] * 5 + ["b"] * 3,
            "clock": [1400.0, 1410.0, 1405.0, 1395.0, 900.0, 1000.0, 1000.0, 1000.0],
        }
    )
    z = peer_z(frame, "job", {"clock": 10.0}).get_column("z_clock").to_list()
    # a: median 1400, MAD 5 -> scale max(7.4, 10) = 10; the slow GPU sits 50 scales below.
    assert z[:5] == pytest.approx([0.0, 1.0, 0.5, -0.5, -50.0])
    # b: identical peers, the floor keeps z finite and zero.
    assert z[5:] == [0.0, 0.0, 0.0]


def test_bit_history_keeps_the_last_n_windows() -> None:
    frame = pl.DataFrame({"history": [None, 0b101, 0b111], "flag": [True, True, False]})
    out = frame.select(push_flags(pl.col("history"), pl.col("flag"), 3).alias("h"))
    assert out.get_column("h").to_list() == [0b1, 0b011, 0b110]
    assert out.select(flag_count(pl.col("h"))).to_series().to_list() == [1, 2, 2]
