"""Strict readers for settings that come from environment variables.

Each helper raises ImproperlyConfigured naming the variable and what it expects, so a wrong value stops
start-up with one clear line instead of a confusing failure later. A secret may also come from a file
named by ``NAME_FILE`` (Docker and Kubernetes secrets).
"""

import ipaddress
import os
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(
                f"{name}_FILE={file_name!r}: cannot read the file ({exc.strerror})"
            ) from exc
    return os.environ.get(name)


def env_str(name: str, default: str | None = None) -> str:
    value = _raw(name)
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"{name} is not set: it is required")
        return default
    return value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected a boolean (true/false, 1/0, yes/no, on/off)")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a whole number") from None
    if minimum is not None and number < minimum or maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a number between {minimum} and {maximum}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = env_str(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: expected one of {', '.join(choices)}")
    return value


def env_ip(name: str, default: str) -> str:
    """An IP address (v4 or v6), e.g. the address a server binds; empty when the variable is set empty."""
    value = env_str(name, default)
    if value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}={value!r}: expected an IP address, e.g. 127.0.0.1 or 0.0.0.0"
            ) from None
    return value


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    value = env_str(name, default)
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name}={value!r}: expected a URL starting with {' or '.join(s + '://' for s in schemes)}"
        )
    if parts.scheme == "unix" and not parts.path:
        raise ImproperlyConfigured(
            f"{name}={value!r}: a unix:// URL needs the socket path, e.g. unix:///tmp/r.sock"
        )
    return value


def env_path(name: str, default: Path) -> Path:
    return Path(env_str(name, str(default))).expanduser().resolve()


def env_decimal(
    name: str, default: str, *, minimum: str | None = None, maximum: str | None = None
) -> Decimal:
    """A decimal number such as a price ("0.20"); exact, so money never picks up float rounding."""
    value = env_str(name, default)
    try:
        number = Decimal(value.strip())
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a decimal number such as 0.25") from None
    if not number.is_finite() or (
        minimum is not None and number < Decimal(minimum) or maximum is not None and number > Decimal(maximum)
    ):
        raise ImproperlyConfigured(f"{name}={value!r}: expected a number between {minimum} and {maximum}")
    return number


def env_price_map(name: str, default: str) -> dict[str, Decimal]:
    """``key=price`` pairs separated by commas ("cpu=0.10,h100=3.50"): a price per hour per device type."""
    prices: dict[str, Decimal] = {}
    for item in env_list(name, default):
        key, sep, price = item.partition("=")
        try:
            number = Decimal(price.strip()) if sep else None
        except InvalidOperation:
            number = None
        if not key.strip() or number is None or not number.is_finite() or number < 0:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not a type=price pair with a price >= 0, e.g. cpu=0.10,h100=3.50"
            )
        prices[key.strip().lower()] = number
    if not prices:
        raise ImproperlyConfigured(f"{name} is empty: give at least one type=price pair, e.g. cpu=0.10")
    return prices
