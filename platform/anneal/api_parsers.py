"""The REST API's JSON parser: DRF's, refusing a NUL character anywhere in the body with a 400 naming where.

DRF's CharField already refuses NUL, but JSON fields (verifier specs, job parameters, rows) take any string,
and PostgreSQL stores NUL in neither text nor jsonb: without this such a body ended as a server error.
"""

from rest_framework import parsers

from anneal.errors import reject_nul


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        reject_nul(data, field="")
        return data
