"""A scripted HTTP server on 127.0.0.1 for the client's tests: the network edge the client talks to, where
a test decides what the API answers (503 then 200, an error body, pages)."""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

Answer = tuple[int, dict, object]


class ScriptedApi:
    """``routes[path]``: a list of answers ``(status, headers, body)`` given in order, the last repeating; or
    a function of the query returning one. ``seen``: every request as (method, path, query, headers)."""

    def __init__(self) -> None:
        self.routes: dict[str, list[Answer] | Callable[[dict], Answer]] = {}
        self.seen: list[tuple[str, str, dict, dict]] = []
        self.url = ""

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        self.seen.append((handler.command, url.path, query, dict(handler.headers)))
        route = self.routes.get(url.path)
        if route is None:
            status, headers, body = 404, {}, {"detail": "Not found."}
        elif callable(route):
            status, headers, body = route(query)
        else:
            status, headers, body = route[0] if len(route) == 1 else route.pop(0)
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def __enter__(self) -> "ScriptedApi":
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api._answer(self)

            do_POST = do_DELETE = do_GET

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
