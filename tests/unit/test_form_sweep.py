"""Every form on the pages a team member uses, posted with one input at a time set to a value of the wrong
kind or size: each answer is the page again with the error, a redirect with a message, or a 400 page,
never a server error. The forms are read from the rendered pages, so a form added later is swept too."""

from html.parser import HTMLParser

import pytest
from django.test import Client

from anneal.datasets.services import dataset_version_create_from_rows
from anneal.verifiers.models import Verifier
from tests.world import page_client

pytestmark = pytest.mark.django_db

WRONG_VALUES = ["1e999", "9" * 30, "-5", "x", "[1]", "a" * 5000, "\x00"]
# Forms that end something rather than take input: posting them is not what this sweep is about.
SKIPPED_ACTIONS = ("logout", "delete", "revoke", "cancel")


class FormReader(HTMLParser):
    """The POST forms of a page: action and the values a browser would send as the page stands."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._form: dict | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        if tag == "form" and (attrs.get("method") or "get").lower() == "post":
            self._form = {"action": attrs.get("action") or "", "fields": {}}
            self.forms.append(self._form)
        elif self._form is None:
            return
        elif tag in ("input", "textarea", "select") and attrs.get("name"):
            unchecked = attrs.get("type") in ("checkbox", "radio") and "checked" not in attrs
            self._form["fields"][attrs["name"]] = None if unchecked else attrs.get("value", "")
            self._select = attrs["name"] if tag == "select" else None
        elif tag == "option" and self._select:
            fields = self._form["fields"]
            if not fields.get(self._select) or "selected" in attrs:
                fields[self._select] = attrs.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None


@pytest.fixture
def pages(world, launch):
    rows = [{"prompt": f"{n}+1=", "answer": str(n + 1), "domain": "ab"[n % 2]} for n in range(40)]
    version = dataset_version_create_from_rows(
        team=world["core"], user=world["owner"], name="sums", rows=rows
    )
    verifier = launch.verifier()
    job = launch("sweep", version=version)
    client = page_client(world["owner"], Client(raise_request_exception=False))
    urls = [
        "/tokens/",
        "/datasets/upload/",
        f"/datasets/{version.dataset_id}/",
        "/datasets/packs/new/",
        "/verifiers/new/",
        f"/verifiers/{verifier.id}/",
        f"/verifiers/{verifier.id}/edit/",
        "/jobs/new/",
        f"/jobs/{job.id}/",
        "/deployments/",
        "/deployments/new/",
    ]
    return client, urls


def wrong_posts(form: dict, sent: dict, swept: set) -> list[tuple[str, dict]]:
    """(input, data) for each input of `form` and each wrong value. An input named `<type>.<option>` in a form
    with a `type` choice (the verifier builder) is posted with that type chosen, as the server reads only the
    chosen type's options. A form whose inputs were swept already at another address (the builder, new and
    edit) is swept again on its inputs outside any type and on the type it shows: the rest was read by the
    same code with the same values."""
    fields = form["fields"]
    typed = "type" in fields
    repeat = frozenset(fields) in swept
    swept.add(frozenset(fields))
    posts = []
    for name in fields:
        if name == "csrfmiddlewaretoken":
            continue
        kind = name.split(".")[0] if typed and "." in name else None
        if repeat and kind is not None and kind != fields["type"]:
            continue
        chosen = {"type": kind} if kind else {}
        posts.extend((name, {**sent, **chosen, name: value}) for value in WRONG_VALUES)
    return posts


def test_no_wrong_value_in_any_form_input_is_a_server_error(pages):
    client, urls = pages
    server_errors, posts, swept = [], 0, set()
    for url in urls:
        page = client.get(url)
        assert page.status_code == 200, url
        reader = FormReader()
        reader.feed(page.content.decode())
        for form in reader.forms:
            action = form["action"] or url
            if any(word in action for word in SKIPPED_ACTIONS):
                continue
            sent = {name: value for name, value in form["fields"].items() if value is not None}
            for name, data in wrong_posts(form, sent, swept):
                response = client.post(action, data)
                posts += 1
                if response.status_code >= 500:
                    server_errors.append((action, name, data[name][:20], response.status_code))
    assert posts > 500  # the pages' forms were found and swept
    assert server_errors == []


def test_each_builder_option_is_posted_with_its_own_type_chosen():
    form = {
        "action": "",
        "fields": {"name": "", "type": "exact_match", "regex.pattern": "", "exact_match.compare": ""},
    }
    swept: set = set()
    first = wrong_posts(form, {}, swept)
    assert {(name, data["type"]) for name, data in first if "." in name} == {
        ("regex.pattern", "regex"),
        ("exact_match.compare", "exact_match"),
    }
    assert len(first) == 4 * len(WRONG_VALUES)
    again = {name for name, _ in wrong_posts(form, {}, swept)}
    assert again == {"name", "type", "exact_match.compare"}


def test_what_the_sweep_found_is_refused_with_what_is_wrong(pages):
    client, _ = pages
    exact = Verifier.objects.get(name="exact").id
    clone = client.post(f"/verifiers/{exact}/clone/", {"name": "a" * 201}, follow=True)
    assert "name: at most 200 characters, got 201" in clone.content.decode()
    edit = client.post(f"/verifiers/{exact}/edit/", {"type": "exact_match", "spec_json": "[1]"})
    assert edit.status_code == 200
    assert "must be a JSON object with a &#x27;type&#x27;" in edit.content.decode()
    budget = client.post("/deployments/budget/", {"monthly_cap_usd": "1e12"}, follow=True)
    assert "must be below 100,000,000 USD" in budget.content.decode()
