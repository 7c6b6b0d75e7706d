"""Errors a user can cause. Services raise them; pages show them inline and the API returns 400."""


class InputError(Exception):
    """A problem with what the user sent, naming the field (and row) so it can be fixed."""

    def __init__(self, errors: list[dict] | str, *, field: str = "non_field_errors") -> None:
        if isinstance(errors, str):
            errors = [{"field": field, "message": errors}]
        self.errors = errors
        super().__init__("; ".join(_describe(e) for e in errors))


def _describe(error: dict) -> str:
    where = error.get("field", "")
    if "row" in error:
        where = f"row {error['row']}, {where}" if where else f"row {error['row']}"
    return f"{where}: {error['message']}" if where else error["message"]
