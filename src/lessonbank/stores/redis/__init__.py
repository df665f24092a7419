"""The Redis store (``redis://``, ``rediss://``); needs ``pip install 'lessonbank[redis]'``.

``db`` holds the connection, key layout, transactions and retries; ``index`` the lesson index;
``jobs`` the queue; ``seed`` seed 000's redis-cli keys; ``store`` composes them.
"""

from lessonbank.stores.redis.store import RedisStore

__all__ = ["RedisStore"]
