"""ASGI entry point: HTTP through Django, websockets through Channels (session-authenticated)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anneal.settings")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from anneal.request_limits import BodyLimitASGI  # noqa: E402
from anneal.training.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimitASGI(django_app),  # a body over its limit is cut off as it streams in
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
