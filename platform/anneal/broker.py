"""The Redis transport Celery speaks through: kombu's own, with one fix for a restart of Redis.

When Redis goes away while a worker waits on BRPOP, kombu 5.7's consumer first "collects" the broken
connection, which detaches the transport from its connection but leaves the channel open (its close raised
on the dead socket), and then closes the connection. That close puts the worker's unacknowledged messages
back, which needs a new client, whose settings come from the detached connection: an AttributeError that is
not a connection error, so Celery gives up and the worker exits ("Unrecoverable error"). Here a channel
whose connection is gone says so as a connection error, which Celery ignores and reconnects after; the
unacknowledged messages stay in Redis's unacked set, restored after the visibility timeout as after a crash.

Installed under the ``redis`` and ``rediss`` names, so every broker URL the settings make uses it.
"""

from __future__ import annotations

import redis
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _get_pool(self, asynchronous: bool = False):  # type: ignore[no-untyped-def]
        if self.connection is None or self.connection.client is None:
            raise redis.ConnectionError("the broker connection was closed")
        return super()._get_pool(asynchronous=asynchronous)


class Transport(kombu_redis.Transport):
    Channel = Channel


for _scheme in ("redis", "rediss"):
    TRANSPORT_ALIASES[_scheme] = f"{__name__}:Transport"
