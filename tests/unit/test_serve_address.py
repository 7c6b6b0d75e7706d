"""Where a serve worker's replicas listen and the address they record for web's /v1 proxy (workers.deploy)."""

import socket

import pytest
from django.core.exceptions import ImproperlyConfigured

from anneal.deployments.models import Replica
from anneal.env import env_ip
from workers.deploy import advertised_host, free_port


def test_by_default_replicas_listen_on_loopback_and_record_it(settings):
    settings.DEPLOY_SERVE_BIND_HOST, settings.DEPLOY_SERVE_ADVERTISE_HOST = "127.0.0.1", ""
    assert advertised_host() == "127.0.0.1"


def test_bound_to_every_address_a_replica_records_the_hosts_own(settings):
    settings.DEPLOY_SERVE_BIND_HOST, settings.DEPLOY_SERVE_ADVERTISE_HOST = "0.0.0.0", ""
    assert advertised_host() == socket.gethostbyname(socket.gethostname())
    with socket.socket() as server:  # a port bound as a replica binds it: the recorded address reaches it
        server.bind((settings.DEPLOY_SERVE_BIND_HOST, free_port()))
        server.listen(1)
        socket.create_connection((advertised_host(), server.getsockname()[1]), timeout=2).close()


def test_an_advertised_address_wins(settings):
    settings.DEPLOY_SERVE_BIND_HOST, settings.DEPLOY_SERVE_ADVERTISE_HOST = "0.0.0.0", "10.1.2.3"
    assert advertised_host() == "10.1.2.3"


def test_an_ipv6_replica_address_is_bracketed():
    assert Replica(host="fd00::7", port=8101).base_url == "http://[fd00::7]:8101"
    assert Replica(host="10.1.2.3", port=8101).base_url == "http://10.1.2.3:8101"


def test_a_bind_address_that_is_not_an_ip_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("ANNEAL_SERVE_BIND_HOST", "serve.internal")
    with pytest.raises(ImproperlyConfigured, match="ANNEAL_SERVE_BIND_HOST='serve.internal': expected an IP"):
        env_ip("ANNEAL_SERVE_BIND_HOST", "127.0.0.1")
