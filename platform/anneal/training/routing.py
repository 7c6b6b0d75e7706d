from django.urls import path

from anneal.training.consumers import JobEventsConsumer

websocket_urlpatterns = [
    path("ws/jobs/<int:job_id>/", JobEventsConsumer.as_asgi()),
]
