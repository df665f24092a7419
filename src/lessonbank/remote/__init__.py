"""RemoteBank (:mod:`.sync`) and AsyncRemoteBank (:mod:`.aio`): the two facades of a bank served by
``lessonbank serve``, with the methods, arguments and return types of LessonBank and
AsyncLessonBank, over httpx.

Each method is one request of the REST API (:mod:`.requests`); the answer is parsed back into the
same records, and an error response raises the class the embedded bank would (:mod:`.calls`).

Differences from the embedded bank, all from running elsewhere: no ``new_worker`` (the server's
workers run the jobs) and none of the bank's parts (``store``, ``services``, ``settings``);
``flush`` and a waited-for ``consolidate`` wait on the server; a refused or missing API key is
ConfigError and an unreachable server StoreError.
"""

from lessonbank.remote.aio import AsyncRemoteBank
from lessonbank.remote.sync import RemoteBank

__all__ = ["AsyncRemoteBank", "RemoteBank"]
