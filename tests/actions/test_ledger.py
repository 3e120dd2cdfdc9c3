from pathlib import Path

from medic.actions.ledger import Ledger, action_key
from tests.builders import at


def test_a_key_is_claimed_once() -> None:
    ledger = Ledger()
    key = action_key("det1", "drain", "node n3")
    assert ledger.claim(key, at(0))
    assert not ledger.claim(key, at(1))
    assert ledger.claim(action_key("det1", "drain", "node n4"), at(1))


def test_keys_survive_a_restart_through_the_file_and_bad_lines_are_skipped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.jsonl"
    Ledger(path).claim("k1", at(0))
    with path.open("a") as file:
        file.write('not json\n{"key": 1}\n')
    reopened = Ledger(path)
    assert "k1" in reopened
    assert reopened.skipped_lines == 2
    assert not reopened.claim("k1", at(5))


def test_keys_expire_after_the_retention() -> None:
    ledger = Ledger(retention_s=60)
    ledger.claim("k1", at(0))
    ledger.claim("k2", at(30))
    assert ledger.claim("k3", at(70))
    assert len(ledger) == 2
    assert ledger.claim("k1", at(71))


def test_the_file_is_compacted_to_the_keys_kept(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, retention_s=10)
    for i in range(3000):
        assert ledger.claim(f"k{i}", at(i))
    lines = path.read_text().splitlines()
    assert len(lines) <= 1024 + 1
    reopened = Ledger(path, retention_s=10)
    assert "k2999" in reopened and "k2990" in reopened
    assert not reopened.claim("k2999", at(2999))
    assert reopened.skipped_lines == 0


def test_compaction_keeps_every_key_within_the_retention(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    for i in range(2100):
        ledger.claim(f"k{i}", at(i))
    ledger.compact()
    reopened = Ledger(path)
    assert len(reopened) == 2100
    assert reopened.file_lines == 2100
