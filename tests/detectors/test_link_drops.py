"""A node's own link drops, apart from the ones its switch caused."""

from __future__ import annotations

from medic.detectors.link_drops import LinkDrops
from medic.timeutil import US

MINUTE = 60 * US


def test_a_drop_logged_and_counted_is_one_drop() -> None:
    drops = LinkDrops(MINUTE)
    for t in (100, 400):
        drops.log("n1", t * US)
        drops.log("n1", t * US + 3 * US)  # the NCCL async event after the kernel's line
        drops.count("n1", (t + 20) * US, 1)
    assert drops.own(0, 2) == {"n1": (2, True)}


def test_drops_other_nodes_had_within_the_span_are_not_a_nodes_own() -> None:
    drops = LinkDrops(MINUTE)
    drops.count("n1", 200 * US, 1)
    drops.count("n2", 230 * US, 1)  # the same retraining, scraped a window later
    drops.count("n2", 500 * US, 1)
    assert drops.own(0, 1) == {"n2": (1, False)}
    drops.log("n3", 520 * US)  # another node's line near n2's second drop
    assert drops.own(0, 1) == {}


def test_forgotten_drops_no_longer_count() -> None:
    drops = LinkDrops(MINUTE)
    drops.count("n1", 100 * US, 2)
    drops.log("n2", 900 * US)
    drops.forget(500 * US)
    assert len(drops) == 1 and drops.own(0, 1) == {"n2": (1, True)}
