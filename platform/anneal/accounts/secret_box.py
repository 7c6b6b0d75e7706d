"""Encryption at rest for team secrets: Fernet (AES-128-CBC with HMAC-SHA256) keyed from the environment.

ANNEAL_SECRETS_KEY may list several keys: the first encrypts, every one decrypts, so an operator rotates by
putting a new key first. A key derived from SECRET_KEY always decrypts too, so secrets stored before
ANNEAL_SECRETS_KEY was set stay readable. Any text works as a key; one that is not already a Fernet key is
hashed into one.
"""

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretUnreadable(Exception):
    """The stored value does not decrypt with any configured key (the keys changed without rotation)."""


def _fernet_key(text: str, *, label: bytes) -> bytes:
    try:
        if len(base64.urlsafe_b64decode(text.encode())) == 32 and len(text) == 44:
            return text.encode()
    except (ValueError, TypeError):
        pass
    return base64.urlsafe_b64encode(hashlib.sha256(label + text.encode()).digest())


def _box() -> MultiFernet:
    keys = [_fernet_key(key, label=b"anneal-secrets-key\0") for key in settings.SECRETS_KEYS]
    # A separate derivation of SECRET_KEY, so the Fernet key is not SECRET_KEY's own hash used elsewhere.
    keys.append(_fernet_key(settings.SECRET_KEY, label=b"anneal-team-secrets-from-secret-key\0"))
    return MultiFernet([Fernet(key) for key in dict.fromkeys(keys)])


def encrypt(value: str) -> str:
    return _box().encrypt(value.encode()).decode("ascii")


def decrypt(ciphertext: str) -> str:
    try:
        return _box().decrypt(ciphertext.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise SecretUnreadable("the stored value does not decrypt with the configured keys") from None
