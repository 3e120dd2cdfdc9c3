import pytest

from medic.parse.fragments import FragmentError, expanded, fragments_of


def test_every_named_fragment_is_written_out_and_other_braces_are_left_alone() -> None:
    fragments = {"num": "[0-9]+", "unit": "(?:s|ms)"}
    assert expanded(r"took {{num}}{{unit}} at x{2}", fragments) == r"took [0-9]+(?:s|ms) at x{2}"
    assert expanded("no fragment here", {}) == "no fragment here"


def test_a_fragment_the_table_lacks_is_named_in_the_error() -> None:
    with pytest.raises(FragmentError, match="names no fragment 'nmu'"):
        expanded("{{nmu}}", {"num": "[0-9]+"})


def test_a_fragments_table_maps_names_to_strings() -> None:
    assert fragments_of({}) == {}
    assert fragments_of({"fragments": {"a": "b"}}) == {"a": "b"}
    for bad in ({"fragments": {"a": 1}}, {"fragments": ["a"]}):
        with pytest.raises(FragmentError, match=r"\[fragments\] must map names"):
            fragments_of(bad)
