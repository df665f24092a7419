"""RemoteBank (:mod:`.sync`) and AsyncRemoteBank (:mod:`.aio`): the two facades of a bank served by
``lessonbank serve``, with the methods, arguments and return types of LessonBank and
AsyncLessonBank, over httpx.

Each method builds its operation's request model (:mod:`lessonbank.requests`) and sends it as the REST
call the table of operations names (:mod:`lessonbank.operations`); the answer is parsed back into the
operation's result type, and an error response raises the class the embedded bank would
(:mod:`.calls`). :mod:`.sync` is :mod:`.aio` without ``async``/``await`` (:mod:`.transport` holds the
plumbing that differs).

Differences from the embedded bank, all from running elsewhere: no ``new_worker`` (the server's
workers run the jobs) and none of the bank's parts (``store``, ``services``, ``settings``);
``flush`` and a waited-for ``consolidate`` wait on the server; a refused or missing API key is
ConfigError and an unreachable server StoreError.
"""

from lessonbank.remote.aio import AsyncRemoteBank
from lessonbank.remote.sync import RemoteBank

__all__ = ["AsyncRemoteBank", "RemoteBank"]
