"""Reading log lines: what the log parsers share (the prefix stripper, for now)."""
