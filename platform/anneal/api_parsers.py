"""The REST API's JSON parser: DRF's, refusing a body nested past ``anneal.jsontext.MAX_DEPTH`` and a NUL
character anywhere in it, each with a 400 that says so.

DRF's CharField already refuses NUL, but JSON fields (verifier specs, job parameters, rows) take any string,
and PostgreSQL stores NUL in neither text nor jsonb: without this such a body ended as a server error. So did
a few kilobytes of brackets: ``json.loads`` raises RecursionError, not the ValueError DRF turns into a 400.
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from anneal import jsontext
from anneal.errors import reject_nul


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
            jsontext.check_depth(data)
        except (RecursionError, jsontext.TooDeep):
            raise ParseError(f"JSON parse error - {jsontext.TOO_DEEP}") from None
        reject_nul(data, field="")
        return data
