"""``python -m membrain.cli``: the ``membrain`` command."""

from membrain.cli import main

main()
