"""Loads the Plotly Dash apps kept in frontend/dash/; each registers itself with django-plotly-dash.

frontend/ is data for the platform, not a package (a folder named `dash` on sys.path would shadow the
Dash library), so the apps are loaded from their files.
"""

import importlib.util
import sys

from django.conf import settings


def load_dashboards() -> list[str]:
    loaded = []
    for path in sorted((settings.FRONTEND_DIR / "dash").glob("*.py")):
        name = f"anneal_dash_{path.stem}"
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        loaded.append(name)
    return loaded
