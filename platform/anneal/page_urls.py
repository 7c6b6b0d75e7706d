"""The browser pages. Every page but login needs a signed-in user; names are not namespaced (``home``,
``job-detail``), while the REST API's live under ``api:``."""

from django.contrib.auth import views as auth_views
from django.urls import path

from anneal.accounts import team_views
from anneal.accounts import views as accounts
from anneal.accounts.login import SignInView
from anneal.datasets import views as datasets
from anneal.deployments import views as deployments
from anneal.glossary import glossary
from anneal.guide import example_create_view
from anneal.sandboxes_view import sandbox_fleet
from anneal.training import card_views, launch_views
from anneal.training import views as training
from anneal.verifiers import views as verifiers
from anneal.verifiers.import_views import verifier_import_page

urlpatterns = [
    path("", accounts.home, name="home"),
    path("guide/example/", example_create_view, name="guide-example"),
    path("login/", SignInView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("team/", accounts.team_switch, name="team-switch"),
    path("tokens/", accounts.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", accounts.token_revoke, name="token-revoke"),
    path("team/settings/", team_views.team_settings, name="team-settings"),
    path("team/secrets/<int:pk>/delete/", team_views.team_secret_delete_view, name="team-secret-delete"),
    path("team/outbound/<int:pk>/remove/", team_views.outbound_host_remove_view, name="outbound-host-remove"),
    path("datasets/", datasets.dataset_list, name="dataset-list"),
    path("datasets/upload/", datasets.dataset_upload, name="dataset-upload"),
    path("datasets/<int:pk>/", datasets.dataset_detail, name="dataset-detail"),
    path("datasets/uploads/<int:pk>/", datasets.upload_detail, name="upload-detail"),
    path("datasets/uploads/<int:pk>/mapping/", datasets.upload_map, name="upload-map"),
    path("datasets/uploads/<int:pk>/accept/", datasets.upload_accept, name="upload-accept"),
    path("datasets/uploads/<int:pk>/reject/", datasets.upload_reject, name="upload-reject"),
    path("datasets/<int:pk>/delete/", datasets.dataset_delete_view, name="dataset-delete"),
    path("datasets/versions/<int:pk>/split/", datasets.version_split, name="version-split"),
    path("datasets/versions/<int:pk>/delete/", datasets.version_delete, name="version-delete"),
    path("datasets/packs/new/", datasets.pack_new, name="pack-new"),
    path("verifiers/", verifiers.verifier_list, name="verifier-list"),
    path("verifiers/new/", verifiers.verifier_new, name="verifier-new"),
    path("verifiers/import/", verifier_import_page, name="verifier-import"),
    path("verifiers/<int:pk>/", verifiers.verifier_detail, name="verifier-detail"),
    path("verifiers/<int:pk>/edit/", verifiers.verifier_edit, name="verifier-edit"),
    path("verifiers/<int:pk>/clone/", verifiers.verifier_clone_page, name="verifier-clone"),
    path("verifiers/<int:pk>/delete/", verifiers.verifier_delete_page, name="verifier-delete"),
    path("sandboxes/", sandbox_fleet, name="sandbox-fleet"),
    path("jobs/", training.job_list, name="job-list"),
    path("jobs/queue/", training.job_queue, name="job-queue"),
    path("dashboards/", training.dashboards, name="dashboards"),
    path("jobs/new/", launch_views.job_new, name="job-new"),
    path("jobs/new/estimate/", launch_views.job_new_estimate, name="job-new-estimate"),
    path("help/glossary/", glossary, name="glossary"),
    path("jobs/<int:pk>/", training.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", training.job_cancel_view, name="job-cancel"),
    path("jobs/<int:pk>/pause/", training.job_pause_view, name="job-pause"),
    path("jobs/<int:pk>/resume/", training.job_resume_view, name="job-resume"),
    path("jobs/<int:pk>/retry/", training.job_retry_view, name="job-retry"),
    path("jobs/<int:pk>/rollouts/", training.job_rollouts_view, name="job-rollouts"),
    path("checkpoints/<int:pk>/card/", card_views.checkpoint_card, name="checkpoint-card"),
    path(
        "checkpoints/<int:pk>/card.md", card_views.checkpoint_card_markdown, name="checkpoint-card-markdown"
    ),
    path("deployments/", deployments.deployment_list, name="deployment-list"),
    path("deployments/new/", deployments.deployment_new, name="deployment-new"),
    path("deployments/budget/", deployments.team_budget_view, name="deployment-budget"),
    path("deployments/<int:pk>/", deployments.deployment_detail, name="deployment-detail"),
    path("deployments/<int:pk>/stop/", deployments.deployment_stop_view, name="deployment-stop"),
    path("deployments/<int:pk>/tier/", deployments.deployment_tier_view, name="deployment-tier"),
    path("deployments/<int:pk>/override/", deployments.deployment_override_view, name="deployment-override"),
    path("deployments/<int:pk>/keys/", deployments.deployment_key_create_view, name="deployment-key-create"),
    path(
        "deployments/keys/<int:pk>/revoke/",
        deployments.deployment_key_revoke_view,
        name="deployment-key-revoke",
    ),
    path("deployments/<int:pk>/playground/", deployments.playground, name="deployment-playground"),
    path(
        "deployments/<int:pk>/playground/chat", deployments.playground_chat, name="deployment-playground-chat"
    ),
]
