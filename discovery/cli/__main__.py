"""``python -m discovery.cli``: the ``tool-index`` command line."""

from discovery.cli.main import main

main(prog_name="tool-index")
