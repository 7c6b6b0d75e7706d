"""The page that turns a pasted OpenAI fine-tuning grader into a verifier (the API's POST …/verifiers/import)."""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from anneal.errors import InputError
from anneal.pages import writable_team
from anneal.verifiers.openai_import import verifier_import_openai

FIELDS = ("name", "judge_endpoint", "judge_api_key_secret")
MAX_GRADER_CHARS = 256 * 1024  # OpenAI's own limit on a python grader's source


@require_http_methods(["GET", "POST"])
@login_required
def verifier_import_page(request):
    team = writable_team(request)
    values = {key: (request.POST.get(key) or "").strip() for key in (*FIELDS, "grader")}
    errors: list[dict] = []
    if request.method == "POST":
        try:
            verifier, notes = _import(request, team, values)
        except InputError as exc:
            errors = exc.errors
        else:
            messages.success(request, f"Imported '{verifier.name}' from the OpenAI grader (version 1).")
            for note in notes:
                messages.info(request, note)
            return redirect("verifier-detail", pk=verifier.pk)
    context = {"section": "verifiers", "team": team, "values": values, "errors": errors}
    return render(request, "verifiers/import.html", context, status=400 if errors else 200)


def _import(request, team, values: dict):
    text = values["grader"]
    if not text:
        raise InputError("paste the grader's JSON", field="grader")
    if len(text) > MAX_GRADER_CHARS:
        raise InputError(f"is longer than {MAX_GRADER_CHARS // 1024} KiB", field="grader")
    try:
        grader = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", field="grader"
        ) from None
    imported = verifier_import_openai(
        team=team, user=request.user, grader=grader, **{key: values[key] for key in FIELDS}
    )
    return imported.verifier, imported.notes
