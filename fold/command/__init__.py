"""The command's parts behind ``fold/cli.py``: its process setup (``process``), the fold run
(``run``, with its progress bar in ``progress``) and the ``ledger`` subcommand (``ledger``);
and the exit codes it documents (``docs/command.md``)."""

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
