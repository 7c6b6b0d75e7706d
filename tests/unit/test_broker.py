"""Every broker connection the platform makes goes through anneal.broker's transport (tcp and unix socket)."""

from kombu import Connection

from anneal import broker
from anneal.tasks import app


def test_the_celery_app_connects_through_the_fixed_transport():
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, broker.Transport)


def test_a_unix_socket_broker_url_uses_it_too():
    with Connection("redis+socket:///tmp/anneal-no-such.sock?virtual_host=2") as connection:
        assert isinstance(connection.transport, broker.Transport)
