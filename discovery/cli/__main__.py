"""The ``tool-index`` program: the console script's entry point, and ``python -m discovery.cli``.

Importing SQLAlchemy, numpy, click and rich makes tens of thousands of objects that live as long
as the process. On the way they set off many collections, a full one among them, which free next
to nothing and weigh on every start of the command. The program pauses the collector while it
imports the command line, and then does not walk what the imports made either: freezing and
unfreezing moves every tracked object to the oldest generation unexamined, where the young
collections that would have promoted them step by step do not look (a later full collection
still does). This is the program's choice for its own process, made here, in the entry point
that only the program runs: the library never touches the collector of the process importing it.
"""

from discovery.cli._collector import collector_paused


def run() -> None:
    """Run the ``tool-index`` command line on ``sys.argv``."""
    with collector_paused():
        from discovery.cli._main import main
    main(prog_name="tool-index")


if __name__ == "__main__":
    run()
