"""The ``scholarloop`` command line: the top layer, nothing imports it."""
