"""Reading log lines: the prefix stripper in front of the parsers, and the progress parser
(its known formats, the learning reader and the corpus scoring)."""
