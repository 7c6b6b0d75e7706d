"""Where a verifier may send requests, and with which credentials: the outbound policy of one team.

The platform builds an ``Outbound`` for a team (its allowed hosts, the installation's, its secrets, its
deployments reachable as judges) and hands it to ``build_scorer``; this module knows nothing of Django. With
no ``Outbound`` nothing is allowed, so a scorer built without one cannot reach anything.

Every request goes through ``CheckedTransport``: the host must be on the allowed list, its name is resolved
here, each resolved address is checked, and the connection goes to that checked address (the original name
stays in the Host header and TLS server name), so a DNS answer that changes between check and connect
(rebinding) cannot swap the target. A redirect is a new request through the same transport, checked again.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# (host, port) -> the addresses the host resolves to, as text.
Resolver = Callable[[str, int], list[str]]

# Cloud instance metadata services: reachable only when the literal address itself is allowed.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


class OutboundRefused(Exception):
    """A request a verifier may not make; the message says why and what an owner can do. No byte was sent."""


@dataclass(frozen=True)
class HostEntry:
    """One allowed host: an exact name or address (optionally one port), or ``*.domain`` for its subdomains.

    Only an exact entry lets the host resolve to a loopback, private, link-local or otherwise non-public
    address; a wildcard entry reaches public addresses only.
    """

    host: str
    port: int | None = None
    wildcard: bool = False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        shown = f"*.{host}" if self.wildcard else host
        return f"{shown}:{self.port}" if self.port is not None else shown

    def matches(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


def parse_host_entry(text: str) -> HostEntry:
    """``api.example.com``, ``api.example.com:443``, ``*.example.com``, ``10.0.0.5:8000``, ``[::1]:8000``.

    ValueError with a message a user can act on for anything else (a URL, a path, a bad port).
    """
    raw = (text or "").strip().lower().rstrip(".")
    if not raw:
        raise ValueError("give a host name or address, e.g. api.example.com or 10.0.0.5:8000")
    if "/" in raw or "@" in raw or "?" in raw or "#" in raw:
        raise ValueError(f"{text!r}: give a host (and optional port), not a URL, e.g. api.example.com:443")
    port: int | None = None
    host = raw
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: an IPv6 address in brackets needs its closing ]")
        host, rest = raw[1:end], raw[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{text!r}: write [address]:port")
            port = _port(rest[1:], text)
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
        port = _port(port_text, text)
    wildcard = host.startswith("*.")
    if wildcard:
        host = host[2:]
    if _address(host) is not None:
        if wildcard:
            raise ValueError(f"{text!r}: a wildcard takes a domain name, not an address")
        return HostEntry(host=str(_address(host)), port=port)
    if not _HOSTNAME.match(host):
        raise ValueError(f"{text!r}: not a host name (letters, digits, dots and dashes) or an IP address")
    if wildcard and "." not in host:
        raise ValueError(f"{text!r}: a wildcard covers the subdomains of a domain, e.g. *.example.com")
    return HostEntry(host=host, port=port, wildcard=wildcard)


def _port(text: str, original: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"{original!r}: the port must be a number from 1 to 65535")
    return int(text)


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def address_refusal(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is ("a loopback address"), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a carrier-grade NAT (shared) address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a reserved address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class JudgeRoute:
    """How to call a platform deployment as a judge: the platform's own /v1 base URL and a key for it."""

    base_url: str
    api_key: str


@dataclass(frozen=True)
class Outbound:
    """A team's outbound policy. ``secrets`` and ``deployments`` may be lazy mappings: a value is looked up
    (decrypted, or a key issued) only when a scorer asks for it, at build time."""

    allowed_hosts: tuple[HostEntry, ...] = ()
    secrets: Mapping[str, str] = field(default_factory=dict)
    deployments: Mapping[str, JudgeRoute] = field(default_factory=dict)
    resolver: Resolver = system_resolver
    # Where to tell users allowed hosts are managed; shown in refusals.
    manage_hint: str = "an owner of the team can allow it under Team settings → Outbound endpoints"

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host``:``port`` is on the allowed list (its addresses are checked on each call)."""
        host = _normal(host)
        return any(entry.matches(host, port) for entry in self.allowed_hosts)

    def check(self, host: str, port: int, *, trusted: tuple[HostEntry, ...] = ()) -> str:
        """The address to connect to for ``host``:``port``; OutboundRefused before any connection otherwise.

        ``trusted``: exact entries the caller vouches for (the platform's own /v1 for a deployment judge).
        """
        host = _normal(host)
        literal = _address(host)
        entries = [e for e in (*trusted, *self.allowed_hosts) if e.matches(host, port)]
        if not entries:
            raise OutboundRefused(f"{_shown(host, port)} is not an allowed endpoint: {self.manage_hint}")
        exact = any(not e.wildcard for e in entries)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = [ipaddress.ip_address(a.split("%")[0]) for a in self.resolver(host, port)]
            except (OSError, UnicodeError) as exc:
                raise OutboundRefused(f"cannot resolve {host}: {exc}") from None
            if not addresses:
                raise OutboundRefused(f"cannot resolve {host}: no address")
        for address in addresses:
            kind = address_refusal(address)
            if kind is None:
                continue
            if address in METADATA_ADDRESSES or (
                isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped in METADATA_ADDRESSES
            ):
                if literal is None or not exact:
                    raise OutboundRefused(
                        f"{host} resolves to {address}, {kind}: refused unless that literal address is allowed"
                    )
            elif not exact:
                raise OutboundRefused(
                    f"{host} resolves to {address}, {kind}: refused unless an owner allows exactly {host!r}"
                )
        return str(addresses[0])


def _normal(host: str) -> str:
    host = host.lower().rstrip(".")
    literal = _address(host)
    return str(literal) if literal is not None else host


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def checked_client(
    outbound: Outbound, *, timeout: float, trusted: tuple[HostEntry, ...] = (), max_redirects: int = 3
) -> httpx.Client:
    """An httpx client whose every request, redirects included, passes ``outbound.check`` first.

    Environment proxies and .netrc are ignored (trust_env off): a proxy would resolve the name itself,
    and .netrc would attach the server's own credentials. httpx drops Authorization on a redirect to
    another origin, so a key follows a redirect only within its own host.
    """
    return httpx.Client(
        transport=CheckedTransport(outbound, trusted=trusted),
        timeout=timeout,
        trust_env=False,
        follow_redirects=True,
        max_redirects=max_redirects,
    )


class CheckedTransport(httpx.BaseTransport):
    """Checks each request's target, then connects to the checked address with the name kept for TLS."""

    def __init__(self, outbound: Outbound, *, trusted: tuple[HostEntry, ...] = ()) -> None:
        self._outbound = outbound
        self._trusted = trusted
        self._inner = httpx.HTTPTransport(trust_env=False, retries=0)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise OutboundRefused(f"{url.scheme}:// is not allowed: only http and https")
        port = url.port or (443 if url.scheme == "https" else 80)
        host = url.raw_host.decode("ascii")  # IDNA-encoded, as allowed entries are written
        address = self._outbound.check(host, port, trusted=self._trusted)
        request.headers["Host"] = url.netloc.decode("ascii")
        request.url = url.copy_with(host=address)
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()
