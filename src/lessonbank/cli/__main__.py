"""``python -m lessonbank.cli``: the same command as the ``lessonbank`` script."""

from lessonbank.cli.app import main

main()
