"""The people and teams every platform test starts from, how each one signs in, and how a test launches a job.

Named users, the same in every test file: owner (owner of team Core), expert (expert in Core), teammate
(viewer in Core) and outsider (owner of team Rivals), all in organisation Acme. Each signs in with the
password "<name>-password". The `world`, `launch` and `data_dirs` fixtures in tests/conftest.py build them;
a test file that needs more (a checkpoint, a second dataset) extends the dict in a fixture of its own.
A deployment starts from ``checkpoint_create``: a checkpoint of a job that trained (no training run).
"""

from pathlib import Path

from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from anneal.accounts.models import Organisation, Role, Team
from anneal.accounts.services import api_token_create, membership_set, team_create
from anneal.datasets.models import DatasetVersion
from anneal.datasets.services import dataset_version_create_from_rows
from anneal.training.models import Checkpoint, Job
from anneal.training.services import job_launch
from anneal.verifiers.models import Verifier
from anneal.verifiers.services import verifier_create

PEOPLE = ("owner", "expert", "teammate", "outsider")
ROWS = [{"prompt": f"{n}+1=", "answer": str(n + 1)} for n in range(8)]


def password(name: str) -> str:
    return f"{name}-password"


def world_create() -> dict:
    """Acme with teams Core (owner, expert, teammate) and Rivals (outsider), as a dict by name."""
    org = Organisation.objects.create(name="Acme")
    people = {name: User.objects.create_user(name, password=password(name)) for name in PEOPLE}
    core = team_create(organisation=org, name="Core", owner=people["owner"])
    membership_set(team=core, user=people["expert"], role=Role.EXPERT)
    membership_set(team=core, user=people["teammate"], role=Role.VIEWER)
    rivals = team_create(organisation=org, name="Rivals", owner=people["outsider"])
    return {**people, "org": org, "core": core, "rivals": rivals}


def api_client(user: User | None) -> APIClient:
    """A REST client signed in as ``user`` without a credential on the wire (None: anonymous)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def token_client(user: User, team: Team | None = None) -> APIClient:
    """A REST client sending a new API token of ``user`` in ``team`` (default: the user's first team), as
    automation does."""
    team = team or user.memberships.order_by("pk").first().team
    _, raw = api_token_create(user=user, team=team, name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def page_client(user: User, client: Client | None = None) -> Client:
    """A browser-less Django client with a session of ``user`` (``client``: sign that one in instead)."""
    client = client or Client()
    client.force_login(user)
    return client


class Launcher:
    """Launches jobs through job_launch as a user does. A job trains, unless told otherwise, on dataset `sums`
    (ROWS) with verifier `exact` (exact match) of its team, each made the first time the team needs it."""

    def __init__(self, world: dict) -> None:
        self.world = world
        self._versions: dict[int, DatasetVersion] = {}
        self._verifiers: dict[int, Verifier] = {}

    def _owner(self, team: Team) -> User:
        return team.memberships.get(role=Role.OWNER).user

    def version(self, team: Team | None = None) -> DatasetVersion:
        team = team or self.world["core"]
        if team.pk not in self._versions:
            self._versions[team.pk] = dataset_version_create_from_rows(
                team=team, user=self._owner(team), name="sums", rows=ROWS
            )
        return self._versions[team.pk]

    def verifier(self, team: Team | None = None) -> Verifier:
        team = team or self.world["core"]
        if team.pk not in self._verifiers:
            self._verifiers[team.pk] = verifier_create(
                team=team, user=self._owner(team), name="exact", spec={"type": "exact_match"}
            )
        return self._verifiers[team.pk]

    def __call__(
        self,
        name: str = "run",
        *,
        team: Team | None = None,
        user: User | None = None,
        version: DatasetVersion | None = None,
        verifier: Verifier | None = None,
        eval_version: DatasetVersion | None = None,
        **params,
    ) -> Job:
        """A job ``name`` of ``team`` (default Core) launched by ``user`` (default the team's owner);
        ``params``: the job's settings (max_steps=1, priority=9, ...)."""
        team = team or self.world["core"]
        version = version or self.version(team)
        verifier = verifier or self.verifier(team)
        return job_launch(
            team=team,
            user=user or self._owner(team),
            name=name,
            dataset_version_id=version.id,
            verifiers=[{"verifier_version": verifier.latest_version.id, "weight": 1.0}],
            eval_dataset_version_id=eval_version.id if eval_version else None,
            params=params,
        )


def checkpoint_create(*, team: Team, location: Path, step: int = 2) -> Checkpoint:
    """A checkpoint at ``location`` (made if missing) of a job of ``team`` that trained the tiny model, written
    straight to the database: what a deployment starts from, without a training run."""
    version = dataset_version_create_from_rows(team=team, user=None, name=f"sums-{location.name}", rows=ROWS)
    job = Job.objects.create(team=team, name="adder", spec={"model": "tiny"}, dataset_version=version)
    location.mkdir(parents=True, exist_ok=True)
    return Checkpoint.objects.create(job=job, step=step, location=str(location))
