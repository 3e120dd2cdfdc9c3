"""An exception in one line: its message's first line, else its type's name."""

from medic.errors import exception_line


def test_an_exception_is_its_first_line_or_its_type() -> None:
    assert exception_line(ValueError("  bad row\nat line 3\n")) == "bad row"
    assert exception_line(TimeoutError()) == "TimeoutError"
    assert exception_line(OSError("   \n")) == "OSError"
