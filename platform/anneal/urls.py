from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from anneal.accounts import api as accounts_api
from anneal.accounts.api import MeApi
from anneal.dashboards import load_dashboards
from anneal.datasets import api as datasets_api
from anneal.datasets import pack_api
from anneal.deployments import api as deployments_api
from anneal.health import HealthDetailApi, healthz
from anneal.training import api as training_api
from anneal.training import card_views
from anneal.verifiers import api as verifiers_api

api_v1 = [
    path("me", MeApi.as_view(), name="me"),
    path("team/secrets", accounts_api.TeamSecretListApi.as_view(), name="team-secret-list"),
    path("team/secrets/<str:name>", accounts_api.TeamSecretDetailApi.as_view(), name="team-secret-detail"),
    path("team/outbound-hosts", accounts_api.OutboundHostListApi.as_view(), name="outbound-host-list"),
    path(
        "team/outbound-hosts/<int:pk>",
        accounts_api.OutboundHostDetailApi.as_view(),
        name="outbound-host-detail",
    ),
    path("datasets", datasets_api.DatasetListApi.as_view(), name="dataset-list"),
    path("datasets/<int:pk>", datasets_api.DatasetDetailApi.as_view(), name="dataset-detail"),
    path("datasets/uploads", datasets_api.UploadCreateApi.as_view(), name="upload-create"),
    path("datasets/uploads/list", datasets_api.UploadListApi.as_view(), name="upload-list"),
    path("datasets/uploads/<int:pk>", datasets_api.UploadDetailApi.as_view(), name="upload-detail"),
    path("datasets/uploads/<int:pk>/preview", datasets_api.UploadPreviewApi.as_view(), name="upload-preview"),
    path("datasets/uploads/<int:pk>/mapping", datasets_api.UploadMappingApi.as_view(), name="upload-mapping"),
    path("datasets/uploads/<int:pk>/errors", datasets_api.UploadErrorsApi.as_view(), name="upload-errors"),
    path(
        "datasets/uploads/<int:pk>/errors.csv",
        datasets_api.UploadErrorsCsvApi.as_view(),
        name="upload-errors-csv",
    ),
    path("datasets/uploads/<int:pk>/accept", datasets_api.UploadAcceptApi.as_view(), name="upload-accept"),
    path("datasets/uploads/<int:pk>/reject", datasets_api.UploadRejectApi.as_view(), name="upload-reject"),
    path("datasets/<int:pk>/versions", datasets_api.VersionListApi.as_view(), name="version-list"),
    path("datasets/versions/<int:pk>", datasets_api.VersionDetailApi.as_view(), name="version-detail"),
    path("datasets/versions/<int:pk>/rows", datasets_api.VersionRowsApi.as_view(), name="version-rows"),
    path("datasets/versions/<int:pk>/split", datasets_api.VersionSplitApi.as_view(), name="version-split"),
    path("datasets/packs", datasets_api.PackListApi.as_view(), name="pack-list"),
    path("datasets/packs/create", datasets_api.PackCreateApi.as_view(), name="pack-create"),
    path("datasets/packs/agent", datasets_api.AgentPackCreateApi.as_view(), name="agent-pack-create"),
    path("datasets/packs/long-context", pack_api.LongContextPackApi.as_view(), name="long-context-pack"),
    path("verifiers", verifiers_api.VerifierListApi.as_view(), name="verifier-list"),
    path("verifiers/preview", verifiers_api.VerifierPreviewApi.as_view(), name="verifier-preview"),
    path("verifiers/import", verifiers_api.VerifierImportApi.as_view(), name="verifier-import"),
    path("verifiers/validate", verifiers_api.VerifierValidateApi.as_view(), name="verifier-validate"),
    path("verifiers/types", verifiers_api.VerifierTypesApi.as_view(), name="verifier-types"),
    path("verifiers/<int:pk>/clone", verifiers_api.VerifierCloneApi.as_view(), name="verifier-clone"),
    path("verifiers/<int:pk>", verifiers_api.VerifierDetailApi.as_view(), name="verifier-detail"),
    path(
        "verifiers/<int:pk>/versions",
        verifiers_api.VerifierVersionCreateApi.as_view(),
        name="verifier-version",
    ),
    path(
        "verifiers/<int:pk>/test-cases",
        verifiers_api.VerifierTestCasesApi.as_view(),
        name="verifier-test-cases",
    ),
    path("jobs", training_api.JobListApi.as_view(), name="job-list"),
    path("jobs/estimate", training_api.JobEstimateApi.as_view(), name="job-estimate"),
    path("jobs/queue", training_api.JobQueueApi.as_view(), name="job-queue"),
    path("jobs/spec", training_api.JobSpecApi.as_view(), name="job-spec"),
    path("models", training_api.ModelListApi.as_view(), name="model-list"),
    path("jobs/<int:pk>", training_api.JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<int:pk>/cancel", training_api.JobCancelApi.as_view(), name="job-cancel"),
    path("jobs/<int:pk>/pause", training_api.JobPauseApi.as_view(), name="job-pause"),
    path("jobs/<int:pk>/resume", training_api.JobResumeApi.as_view(), name="job-resume"),
    path("jobs/<int:pk>/retry", training_api.JobRetryApi.as_view(), name="job-retry"),
    path("jobs/<int:pk>/events", training_api.JobEventsApi.as_view(), name="job-events"),
    path("jobs/<int:pk>/rollouts", training_api.JobRolloutsApi.as_view(), name="job-rollouts"),
    path("jobs/<int:pk>/rollouts/<int:seq>/flag", training_api.RolloutFlagApi.as_view(), name="rollout-flag"),
    path("checkpoints", training_api.CheckpointListApi.as_view(), name="checkpoint-list"),
    path("checkpoints/<int:pk>/card", card_views.CheckpointCardApi.as_view(), name="checkpoint-card-api"),
    path(
        "checkpoints/<int:pk>/card/markdown",
        card_views.CheckpointCardMarkdownApi.as_view(),
        name="checkpoint-card-markdown-api",
    ),
    path("deployments", deployments_api.DeploymentListApi.as_view(), name="deployment-list"),
    path("deployments/usage", deployments_api.TeamUsageApi.as_view(), name="deployment-team-usage"),
    path("deployments/keys", deployments_api.KeyListApi.as_view(), name="deployment-key-list"),
    path(
        "deployments/keys/<int:pk>/revoke",
        deployments_api.KeyRevokeApi.as_view(),
        name="deployment-key-revoke",
    ),
    path("deployments/<int:pk>", deployments_api.DeploymentDetailApi.as_view(), name="deployment-detail"),
    path("deployments/<int:pk>/stop", deployments_api.DeploymentStopApi.as_view(), name="deployment-stop"),
    path("deployments/<int:pk>/tier", deployments_api.DeploymentTierApi.as_view(), name="deployment-tier"),
    path(
        "deployments/<int:pk>/gate/override",
        deployments_api.DeploymentGateOverrideApi.as_view(),
        name="deployment-gate-override",
    ),
    path("deployments/<int:pk>/usage", deployments_api.DeploymentUsageApi.as_view(), name="deployment-usage"),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("healthz/detail", HealthDetailApi.as_view(), name="health-detail"),
    path("admin/", admin.site.urls),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("v1/", include("anneal.deployments.v1_urls")),  # the OpenAI-compatible endpoint of deployments
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("django_plotly_dash/", include("django_plotly_dash.urls")),
    path("", include("anneal.page_urls")),
]

load_dashboards()
