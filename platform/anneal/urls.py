from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from anneal.accounts.api import MeApi
from anneal.dashboards import load_dashboards
from anneal.datasets import api as datasets_api
from anneal.health import healthz
from anneal.training import api as training_api
from anneal.verifiers import api as verifiers_api

api_v1 = [
    path("me", MeApi.as_view(), name="me"),
    path("datasets", datasets_api.DatasetListApi.as_view(), name="dataset-list"),
    path("datasets/<int:pk>", datasets_api.DatasetDetailApi.as_view(), name="dataset-detail"),
    path("datasets/uploads", datasets_api.UploadCreateApi.as_view(), name="upload-create"),
    path("datasets/uploads/<int:pk>", datasets_api.UploadDetailApi.as_view(), name="upload-detail"),
    path("datasets/versions/<int:pk>/rows", datasets_api.VersionRowsApi.as_view(), name="version-rows"),
    path("verifiers", verifiers_api.VerifierListApi.as_view(), name="verifier-list"),
    path("verifiers/<int:pk>", verifiers_api.VerifierDetailApi.as_view(), name="verifier-detail"),
    path(
        "verifiers/<int:pk>/versions",
        verifiers_api.VerifierVersionCreateApi.as_view(),
        name="verifier-version",
    ),
    path("jobs", training_api.JobListApi.as_view(), name="job-list"),
    path("jobs/<int:pk>", training_api.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<int:pk>/cancel", training_api.JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<int:pk>/retry", training_api.JobRetryApi.as_view(), name="job-retry"),
    path("jobs/<int:pk>/events", training_api.JobEventsApi.as_view(), name="job-events"),
    path("checkpoints", training_api.CheckpointListApi.as_view(), name="checkpoint-list"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("django_plotly_dash/", include("django_plotly_dash.urls")),
    path("", include("anneal.page_urls")),
]

load_dashboards()
