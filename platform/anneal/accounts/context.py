from anneal.accounts.selectors import teams_for


def current_team(request) -> dict:
    """Template context: the teams of the signed-in user and the one pages act in."""
    from anneal.accounts.scope import page_team

    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"user_teams": list(teams_for(user)), "current_team": page_team(request)}
