"""Bearer-token authentication for the REST API: `Authorization: Bearer ann_…`."""

from django.utils import timezone
from rest_framework import authentication, exceptions

from anneal.accounts.models import TOKEN_PREFIX, ApiToken, Membership, token_hash


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        raw = raw.strip()
        if not raw.startswith(TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed(f"Malformed API token: tokens start with '{TOKEN_PREFIX}'.")
        token = ApiToken.objects.select_related("user", "team").filter(key_hash=token_hash(raw)).first()
        if token is None or not token.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        if (
            not token.user.is_active
            or not Membership.objects.filter(user=token.user, team=token.team).exists()
        ):
            raise exceptions.AuthenticationFailed("The token's user is no longer a member of its team.")
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword
