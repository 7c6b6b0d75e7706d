"""Plain values across the judge's process boundary: JSON with tags for the types JSON lacks.

Runs inside the sandbox (sent as codec.py; standard library only) and on the host (tests). Only values whose
type is exactly one of the plain types cross: None, bool, int, float, str, bytes, complex, and lists, tuples,
dicts, sets and frozensets of them. A subclass (an int whose __eq__ always answers True) or any other object
is refused with NotPlain, so nothing the program defines can reach the code that decides.
"""

import json
import math

MAX_DEPTH = 64
# Exact types of trusted libraries whose values cross as their plain form (`.tolist()`, a method of the library's
# own C type, which a program cannot replace): numpy's array and scalar types, once a python-science sandbox
# loaded numpy (allow_exact). A program that named its own class here would only claim a value it could return.
_EXTRA = ()


def allow_exact(types):
    global _EXTRA
    _EXTRA = tuple(types)


TAGS = ("$tuple", "$set", "$frozenset", "$dict", "$bytes", "$complex", "$float")


class NotPlain(Exception):
    """The value holds something other than plain data; str() says what, for the reason shown to a user, and
    `value` (when set) is the offending object."""

    value = None


def encode(value, depth=0):
    """`value` as JSON-ready data; NotPlain for anything else. Never calls a method the value could override."""
    if depth > MAX_DEPTH:
        raise NotPlain(f"values nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        if value.bit_length() > 14000:  # about 4,300 digits: Python's own limit on int <-> str
            raise NotPlain("an int with more than 4,300 digits")
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if kind is list:
        return [encode(item, depth + 1) for item in value]
    if kind is tuple:
        return {"$tuple": [encode(item, depth + 1) for item in value]}
    if kind is set or kind is frozenset:
        return {"$" + kind.__name__: [encode(item, depth + 1) for item in value]}
    if kind is dict:
        if all(type(key) is str and not key.startswith("$") for key in value):
            return {key: encode(item, depth + 1) for key, item in value.items()}
        return {"$dict": [[encode(key, depth + 1), encode(item, depth + 1)] for key, item in value.items()]}
    if kind is bytes:
        return {"$bytes": value.hex()}
    if kind is complex:
        return {"$complex": [encode(value.real), encode(value.imag)]}
    if kind in _EXTRA:
        return encode(value.tolist(), depth + 1)
    problem = NotPlain(f"a {_type_name(value)} object, not a plain value")
    problem.value = value
    raise problem


def decode(data, depth=0):
    """The value `encode` was given, from its JSON-ready form (ValueError for a malformed one)."""
    if depth > MAX_DEPTH + 2:
        raise ValueError("nested too deep")
    if type(data) is list:
        return [decode(item, depth + 1) for item in data]
    if type(data) is not dict:
        return data
    if len(data) == 1:
        ((tag, inner),) = data.items()
        if tag == "$tuple":
            return tuple(decode(item, depth + 1) for item in inner)
        if tag == "$set":
            return {decode(item, depth + 1) for item in inner}
        if tag == "$frozenset":
            return frozenset(decode(item, depth + 1) for item in inner)
        if tag == "$dict":
            return {decode(key, depth + 1): decode(item, depth + 1) for key, item in inner}
        if tag == "$bytes":
            return bytes.fromhex(inner)
        if tag == "$complex":
            return complex(decode(inner[0]), decode(inner[1]))
        if tag == "$float":
            return float(inner)
    return {key: decode(item, depth + 1) for key, item in data.items()}


def dumps(value):
    """One line of JSON for `value` (already encoded)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _type_name(value):
    kind = type(value)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", "") or "object"
    if type(module) is not str or type(name) is not str:
        return "object"
    return name if module in ("builtins", "solution", "__main__") else f"{module}.{name}"
