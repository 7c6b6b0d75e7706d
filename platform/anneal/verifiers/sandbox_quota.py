"""Limits on the sandbox work the web side starts for a user: previews, hack probes and test cases.

They take leases on the team's sandbox quota (sandboxes/fleet.py, ANNEAL_SANDBOX_TEAM_QUOTA), the same count a
training job's checks fill, so no member can hold the whole fleet with previews; and previews are limited per
user per minute (ANNEAL_PREVIEW_RATE_PER_MIN).
"""

from django.conf import settings

from anneal.accounts.models import Team
from anneal.errors import LimitReached
from anneal.sandboxes_view import fleet_redis, quota_team_id
from anneal.throttles import window_hit
from sandboxes import fleet
from sandboxes.client import SandboxClient

# Leases end with the runs holding them; a refused caller is told to come back after about this long.
QUOTA_RETRY_S = 10


class SandboxBusy(LimitReached):
    """The team's sandbox quota has no room for the runs now."""


def preview_rate_key(user) -> str:
    return f"anneal:verifier-previews:{user.pk}"


def preview_rate_check(*, user) -> None:
    """Count one preview of `user`; LimitReached (naming the limit and when to retry) past the limit."""
    limit = settings.VERIFIER_PREVIEW_RATE_PER_MIN
    count, left = window_hit(preview_rate_key(user), window_s=60)
    if count > limit:
        raise LimitReached(
            f"at most {limit} verifier previews per minute per user (ANNEAL_PREVIEW_RATE_PER_MIN): "
            f"retry in {left} s",
            field="samples",
            retry_after_s=left,
        )


class TeamSandbox:
    """A SandboxClient whose runs count against a team's sandbox quota, as a job's runs do.

    Remote execution: the batches carry the team, and the sandbox hosts take the leases as for a job; this side
    refuses at once when the quota has no room now, instead of waiting behind the team's jobs. Local execution
    (runs in this process): the leases are taken here, under the same Redis key, for as long as the runs last.

    A refusal raises SandboxBusy from run_many. Scorers turn any sandbox error into a zero score with a reason,
    so the caller checks `refused` after scoring and reports the refusal rather than the zeros.
    """

    def __init__(self, *, team: Team, client: SandboxClient) -> None:
        self.team = team
        self.client = client
        self.refused: SandboxBusy | None = None
        self.runs = 0  # runs done, for the audit entry

    def run_many(self, requests: list, *, batch_id: str | None = None) -> list:
        if not requests:
            return []
        quota = settings.SANDBOX_TEAM_QUOTA
        store = fleet_redis()
        name = quota_team_id(self.team)
        if self.client.mode == "remote":
            # The client sends at most `quota` runs per batch (max_batch): the first batch must find room.
            if fleet.in_flight(store, team=name) + min(len(requests), quota) > quota:
                self._refuse(store, needed=min(len(requests), quota), quota=quota)
            results = self.client.run_many(requests, batch_id=batch_id)
            self.runs += len(results)
            return results
        results = []
        for start in range(0, len(requests), quota):
            part = requests[start : start + quota]
            leases = fleet.try_acquire(store, team=name, runs=len(part), quota=quota)
            if leases is None:
                self._refuse(store, needed=len(part), quota=quota)
            with leases:  # renewed while the part runs, released after it
                results.extend(self.client.run_many(part))
            self.runs += len(part)
        return results

    def _refuse(self, store, *, needed: int, quota: int) -> None:
        busy = fleet.in_flight(store, team=quota_team_id(self.team))
        self.refused = SandboxBusy(
            f"team '{self.team.name}' has {busy} of its {quota} concurrent sandbox runs in use "
            f"(ANNEAL_SANDBOX_TEAM_QUOTA) and this needs {needed}: retry in {QUOTA_RETRY_S} s, "
            "when its running jobs or previews have freed some",
            field="sandbox",
            retry_after_s=QUOTA_RETRY_S,
        )
        raise self.refused
