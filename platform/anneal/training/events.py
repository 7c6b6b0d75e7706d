"""Record job events with a gap-free per-job sequence and broadcast them after commit."""

import json

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F

from anneal.training.models import Job, JobEvent


def job_group(job_id: int) -> str:
    return f"job-{job_id}"


def broadcast_on_commit(group: str, message: dict) -> None:
    # Round-trip through JSON now so an unserialisable payload fails in the writer, not in a consumer.
    message = json.loads(json.dumps(message))

    def send() -> None:
        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group, {"type": "job.event", "event": message})

    transaction.on_commit(send)


def job_events_record(*, job_id: int, events: list[tuple[str, dict]]) -> list[JobEvent]:
    """Append events in order. The job row's lock serialises writers, so numbers never repeat or skip."""
    if not events:
        return []
    payloads = [json.loads(json.dumps(payload)) for _, payload in events]
    with transaction.atomic():
        Job.objects.filter(pk=job_id).update(last_seq=F("last_seq") + len(events))
        last = Job.objects.values_list("last_seq", flat=True).get(pk=job_id)
        first = last - len(events) + 1
        created = JobEvent.objects.bulk_create(
            [
                JobEvent(job_id=job_id, seq=first + i, kind=kind, payload=payload)
                for i, ((kind, _), payload) in enumerate(zip(events, payloads, strict=True))
            ]
        )
        for event in created:
            broadcast_on_commit(job_group(job_id), event.as_message())
    return created


def job_event_record(*, job_id: int, kind: str, payload: dict) -> JobEvent:
    return job_events_record(job_id=job_id, events=[(kind, payload)])[0]
