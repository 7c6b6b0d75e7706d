"""Errors a user can cause. Services raise them; pages show them inline and the API returns 400."""


class InputError(Exception):
    """A problem with what the user sent, naming the field (and row) so it can be fixed."""

    def __init__(self, errors: list[dict] | str, *, field: str = "non_field_errors") -> None:
        if isinstance(errors, str):
            errors = [{"field": field, "message": errors}]
        self.errors = errors
        super().__init__("; ".join(_describe(e) for e in errors))


class LimitReached(InputError):
    """A rate limit or quota is full for now: the API answers 429 with Retry-After, pages show the message.

    The message names the limit (and the setting that sets it) and when to retry."""

    def __init__(self, message: str, *, field: str, retry_after_s: int) -> None:
        super().__init__(message, field=field)
        self.retry_after_s = max(1, int(retry_after_s))


def _describe(error: dict) -> str:
    where = error.get("field", "")
    if "row" in error:
        where = f"row {error['row']}, {where}" if where else f"row {error['row']}"
    return f"{where}: {error['message']}" if where else error["message"]


NUL_MESSAGE = "Null characters are not allowed."  # Django's and DRF's wording for the same refusal


def reject_nul(value: object, *, field: str) -> None:
    """Raise InputError naming the first place in ``value`` (a string, or nested dicts and lists, keys too)
    that holds a NUL character. PostgreSQL stores it in neither text nor jsonb, so it would otherwise end as a
    server error when saved. ``field`` names ``value`` itself ("" for a request body: paths start at its keys).
    """
    path = _nul_path(value, field)
    if path is not None:
        raise InputError(NUL_MESSAGE, field=path or "body")


def holds_nul(value: object) -> bool:
    """Whether ``value`` (a string, or nested dicts and lists, keys too) holds a NUL character anywhere."""
    return _nul_path(value, "value") is not None


def without_nul(value: object) -> object:
    """``value`` (a string, or nested dicts and lists, keys too) with every NUL character replaced by U+FFFD,
    the replacement character. For text the platform did not take from a user and cannot refuse: what a model
    sampled or a sandbox printed (a byte-level tokenizer samples NUL; so does ``head -c 4 /dev/zero``)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    return value


def _nul_path(value: object, path: str) -> str | None:
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if "\x00" in str(key):
                return inner.replace("\x00", "\\0")
            found = _nul_path(item, inner)
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _nul_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None
