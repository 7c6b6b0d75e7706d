from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class DatasetsConfig(AppConfig):
    name = "anneal.datasets"
    label = "datasets"

    def ready(self) -> None:
        # Django writes an uploaded file past FILE_UPLOAD_MAX_MEMORY_SIZE here while it parses the request.
        try:
            Path(settings.FILE_UPLOAD_TEMP_DIR).mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only host (a `manage.py check`, say); an upload then says where it failed
            pass
