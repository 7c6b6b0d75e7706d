"""Sign-in with a lockout and an audit trail, for the sign-in page and the admin's alike.

After LOGIN_MAX_FAILURES failed sign-ins for one username from one address, that pair is refused (even with
the right password) until LOGIN_LOCKOUT_S have passed since the first failure. The counts live in the cache,
so every web process sees them. Each success, failure and refusal is an audit entry (never the password).
"""

import hashlib
import math

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView

from anneal.accounts.services import audit
from anneal.errors import without_nul
from anneal.throttles import window_clear, window_count, window_hit


def failures_key(*, username: str, address: str) -> str:
    # Hashed: usernames are free text of any length, and cache keys must be short and plain.
    digest = hashlib.sha256(f"{username.strip().lower()}\n{address}".encode()).hexdigest()
    return f"anneal:login-failures:{digest}"


def client_address(request) -> str:
    """The address the lockout is kept per: the peer's (behind a proxy, the proxy's; see README)."""
    return request.META.get("REMOTE_ADDR", "") if request is not None else ""


class LockoutMixin:
    """For AuthenticationForm and its subclasses: refuse a locked-out pair, count failures, audit every try."""

    throttled = False

    def clean(self):
        username = self.cleaned_data.get("username") or ""
        address = client_address(self.request)
        key = failures_key(username=username, address=address)
        seen = {"username": without_nul(username[:150]), "address": address}
        failures, left = window_count(key, window_s=settings.LOGIN_LOCKOUT_S)
        if username and failures >= settings.LOGIN_MAX_FAILURES:
            self.throttled = True
            audit(team=None, user=None, action="login.refused", **seen)
            raise forms.ValidationError(
                f"Too many failed sign-ins for this username from your address ({failures}; the limit is "
                f"{settings.LOGIN_MAX_FAILURES}, ANNEAL_LOGIN_MAX_FAILURES): try again in "
                f"{math.ceil(left / 60)} minute(s).",
                code="throttled",
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username:
                window_hit(key, window_s=settings.LOGIN_LOCKOUT_S)
                audit(team=None, user=None, action="login.failed", **seen)
            raise
        window_clear(key)
        audit(team=None, user=self.get_user(), action="login", **seen)
        return cleaned


class SignInForm(LockoutMixin, AuthenticationForm):
    pass


class AdminSignInForm(LockoutMixin, AdminAuthenticationForm):
    pass


class SignInView(LoginView):
    """The sign-in page: a locked-out username and address get 429 with the message on the form."""

    form_class = SignInForm

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
        return response
