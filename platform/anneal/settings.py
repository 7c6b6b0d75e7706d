"""The one settings module. Every value a deployment changes comes from an environment variable (README)."""

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from anneal.env import (
    env_bool,
    env_choice,
    env_decimal,
    env_int,
    env_ip,
    env_list,
    env_path,
    env_price_map,
    env_str,
    env_url,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
FRONTEND_DIR = REPO_ROOT / "frontend"

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "insecure-development-key-only-for-debug" if DEBUG else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "http://localhost:8000,http://127.0.0.1:8000")
BASE_URL = env_url("ANNEAL_BASE_URL", "http://127.0.0.1:8000", schemes=("http", "https"))
# Team secrets (a judge's API key) are encrypted with this key (Fernet; any text is hashed into one). A list:
# the first encrypts, all decrypt, so a key can be rotated. Unset: a key derived from SECRET_KEY.
SECRETS_KEYS = env_list("ANNEAL_SECRETS_KEY", "")
# Hosts every team's verifiers may call (model judges), besides those each team's owners allow; the same
# forms as a team's list: api.example.com, *.example.com, 10.0.0.5:8000. Checked at start-up.
JUDGE_ALLOWED_HOSTS = env_list("ANNEAL_JUDGE_ALLOWED_HOSTS", "")

DATA_DIR = env_path("ANNEAL_DATA_DIR", REPO_ROOT / "var")
UPLOAD_DIR = env_path("ANNEAL_UPLOAD_DIR", DATA_DIR / "uploads")
DATASET_DIR = env_path("ANNEAL_DATASET_DIR", DATA_DIR / "datasets")
MODEL_STORE = env_path("ANNEAL_MODEL_STORE", DATA_DIR / "models")
# The Django-free engines (the reward_model verifier) read the store from the environment, as do the job
# processes this one starts.
os.environ.setdefault("ANNEAL_MODEL_STORE", str(MODEL_STORE))
# Whether jobs may name a hub model id (org/name): only on hosts that can reach a model hub.
MODEL_ALLOW_HUB = env_bool("ANNEAL_ALLOW_HUB", False)
CHECKPOINT_DIR = env_path("ANNEAL_CHECKPOINT_DIR", DATA_DIR / "checkpoints")
UPLOAD_MAX_BYTES = env_int("ANNEAL_UPLOAD_MAX_MB", 200, minimum=1, maximum=100_000) * 1024 * 1024
# What a gzip upload may expand to (a gzip bomb stops here), and the longest line of a JSONL or CSV file.
UPLOAD_MAX_DECOMPRESSED_BYTES = (
    env_int("ANNEAL_UPLOAD_MAX_DECOMPRESSED_MB", 2000, minimum=1, maximum=1_000_000) * 1024 * 1024
)
DATASET_MAX_LINE_BYTES = env_int("ANNEAL_DATASET_MAX_LINE_KB", 8192, minimum=1, maximum=1_000_000) * 1024
# A Parquet upload may have at most this many (leaf) columns; its cells are bounded by the line limit above.
PARQUET_MAX_COLUMNS = env_int("ANNEAL_PARQUET_MAX_COLUMNS", 1000, minimum=1, maximum=100_000)
# Any other request body (JSON, forms); checked while the body streams in (anneal.request_limits).
REQUEST_MAX_BYTES = env_int("ANNEAL_REQUEST_MAX_MB", 10, minimum=1, maximum=10_000) * 1024 * 1024
# An uploaded file past 1 MB goes to a temporary file on disk, never into memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
# ... in a folder beside the uploads (made at start-up), where the uploads sweep finds what a web process killed
# mid-request left behind (anneal.datasets.housekeeping).
FILE_UPLOAD_TEMP_DIR = str(UPLOAD_DIR / "receiving")

# Uploads and dataset versions live in the folders above, or, with ANNEAL_S3_BUCKET set, in any S3-compatible
# store (AWS S3, MinIO, Ceph, R2...) through django-storages, so web and workers may run on separate hosts.
# Workers keep a cache of the (immutable) files they read under ANNEAL_DATASET_CACHE_DIR.
S3_BUCKET = env_str("ANNEAL_S3_BUCKET", "")
DATASET_CACHE_DIR = env_path("ANNEAL_DATASET_CACHE_DIR", DATA_DIR / "cache" / "datasets")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if S3_BUCKET:
    STORAGES["datasets"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": S3_BUCKET,
            "location": env_str("ANNEAL_S3_PREFIX", "anneal"),
            # Unset: AWS's own endpoint for the region; set for MinIO, Ceph, R2 and the like.
            "endpoint_url": (
                env_url("ANNEAL_S3_ENDPOINT_URL", "http://unset", schemes=("http", "https"))
                if env_str("ANNEAL_S3_ENDPOINT_URL", "")
                else None
            ),
            "region_name": env_str("ANNEAL_S3_REGION", "us-east-1"),
            # Unset: boto3 finds credentials itself (instance role, AWS_* variables, ~/.aws).
            "access_key": env_str("ANNEAL_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("ANNEAL_S3_SECRET_ACCESS_KEY", "") or None,
            "file_overwrite": False,
            "default_acl": None,
        },
    }

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_plotly_dash.apps.DjangoPlotlyDashConfig",
    "anneal.accounts",
    "anneal.datasets",
    "anneal.verifiers",
    "anneal.training",
    "anneal.deployments",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads a body (CSRF reads the form): a body over its limit is refused with a 413.
    "anneal.request_limits.BodyLimitMiddleware",
    # Daphne serves no static files; WhiteNoise serves the collected ones (and the source folders in DEBUG).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A REST write sent again with its Idempotency-Key (a client's retry) gets the first answer, not a second act.
    "anneal.idempotency.IdempotencyMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "anneal.urls"
ASGI_APPLICATION = "anneal.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [FRONTEND_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "anneal.accounts.context.current_team",
            ]
        },
    }
]


def _database() -> dict:
    url = env_url(
        "DATABASE_URL",
        f"sqlite:///{DATA_DIR / 'anneal.sqlite3'}",
        schemes=("sqlite", "postgres", "postgresql"),
    )
    config = dj_database_url.parse(url, conn_max_age=0)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Several processes write to the embedded database: wait for locks instead of failing, and take
        # the write lock at BEGIN so two writers never deadlock upgrading a read lock.
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def _redis_urls() -> tuple[str, str]:
    """Return (redis-py URL, Celery broker URL) for REDIS_URL: ``redis://host:port/db`` or ``unix:///sock?db=N``."""
    url = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss", "unix"))
    parts = urlsplit(url)
    if parts.scheme != "unix":
        return url, url
    db = parse_qs(parts.query).get("db", ["0"])[0]
    if not db.isdigit():
        raise ImproperlyConfigured(f"REDIS_URL={url!r}: db must be a number, e.g. unix:///tmp/r.sock?db=0")
    return url, f"redis+socket://{parts.path}?virtual_host={db}"


REDIS_URL, CELERY_BROKER_URL = _redis_urls()
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "datasets.*": {"queue": "default"},
    "housekeeping.*": {"queue": "default"},
    "training.*": {"queue": "gpu"},
    "sandbox.*": {"queue": "sandbox"},
    "deployments.*": {"queue": "default"},
    "serve.*": {"queue": "serve"},
}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_RESULT_EXPIRES = 3600
# A result (a sandbox batch's verdicts) finished while Redis restarts waits for it instead of being lost.
CELERY_RESULT_BACKEND_ALWAYS_RETRY = True
CELERY_RESULT_BACKEND_MAX_RETRIES = 12
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "reap-stale-jobs": {"task": "housekeeping.reap_stale_jobs", "schedule": 30.0},
    "dispatch-jobs": {"task": "housekeeping.dispatch_jobs", "schedule": 15.0},
    "prune-rollouts": {"task": "housekeeping.prune_rollouts", "schedule": 3600.0},
    "reap-stale-replicas": {"task": "deployments.reap_stale_replicas", "schedule": 30.0},
    "sweep-uploads": {"task": "housekeeping.sweep_uploads", "schedule": 3600.0},
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": env_str("ANNEAL_CHANNEL_PREFIX", "anneal"),
            "capacity": 1000,
        },
    }
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

SANDBOX_BACKEND = env_choice("SANDBOX_BACKEND", "bwrap", ("bwrap", "docker", "kubernetes"))
SANDBOX_EXECUTION = env_choice("SANDBOX_EXECUTION", "local", ("local", "remote"))
# Read by sandboxes.registry (Django-free) from the same variables; validated here so start-up fails clearly.
SANDBOX_POOL_SIZE = env_int("ANNEAL_SANDBOX_POOL_SIZE", 2, minimum=0, maximum=64)
SANDBOX_RECYCLE_AFTER = env_int("ANNEAL_SANDBOX_RECYCLE_AFTER", 200, minimum=1, maximum=1_000_000)
# Runs one team may have in flight on the sandbox hosts at once (remote execution; see sandboxes/fleet.py).
SANDBOX_TEAM_QUOTA = env_int("ANNEAL_SANDBOX_TEAM_QUOTA", 64, minimum=1, maximum=100_000)
# Verifier previews one user may start per minute (each may run code or call out); previews, hack probes and
# test cases also take leases on the team's sandbox quota above, as jobs do (anneal.verifiers.sandbox_quota).
VERIFIER_PREVIEW_RATE_PER_MIN = env_int("ANNEAL_PREVIEW_RATE_PER_MIN", 30, minimum=1, maximum=100_000)
# A reward_model verifier's model loads in the web process (previews, hack probes) only up to this size (its
# weight files); larger ones score in jobs, on the gpu-worker.
PREVIEW_MODEL_MAX_MB = env_int("ANNEAL_PREVIEW_MODEL_MAX_MB", 200, minimum=1, maximum=1_000_000)
# Rollout texts older than this many days are dropped (their step, reward and parts stay); 0 keeps them all.
ROLLOUT_RETENTION_DAYS = env_int("ANNEAL_ROLLOUT_RETENTION_DAYS", 90, minimum=0)
JOB_HEARTBEAT_TIMEOUT_S = env_int("ANNEAL_JOB_HEARTBEAT_TIMEOUT_S", 120, minimum=10)
# Training jobs (anneal.training.costs, .limits, .dispatch, .state): USD per device-hour per device type, USD
# per hour of verification (sandbox) time, how many jobs the gpu workers run at once (their total concurrency),
# each team's default limits (a TeamLimits row overrides them), restarts after a crash or a lost worker before
# a job fails, and how long a job asked to pause or stop may take to checkpoint before it is killed.
JOB_DEVICE_PRICES = env_price_map("ANNEAL_DEVICE_PRICES", "cpu=0.10,l4=0.80,a100=2.00,h100=3.50,h200=4.50")
# GiB of memory of one device of each type: a launch whose training step would need more is refused
# (anneal.training.length, formula in gpu_jobs.memory). Same type=number syntax as the prices.
JOB_DEVICE_MEMORY_GIB = env_price_map("ANNEAL_DEVICE_MEMORY_GIB", "cpu=16,l4=24,a100=80,h100=80,h200=141")
JOB_SANDBOX_PRICE_PER_HOUR = env_decimal("ANNEAL_SANDBOX_PRICE_PER_HOUR", "0.05", minimum="0")
JOB_GPU_SLOTS = env_int("ANNEAL_GPU_SLOTS", 1, minimum=1, maximum=10_000)
JOB_TEAM_MAX_RUNNING = env_int("ANNEAL_TEAM_MAX_RUNNING_JOBS", 2, minimum=1, maximum=10_000)
JOB_TEAM_MAX_DEVICES = env_int("ANNEAL_TEAM_MAX_DEVICES", 8, minimum=1, maximum=100_000)
JOB_MAX_RESTARTS = env_int("ANNEAL_JOB_MAX_RESTARTS", 3, minimum=0, maximum=100)
JOB_STOP_GRACE_S = env_int("ANNEAL_JOB_STOP_GRACE_S", 300, minimum=5)
# How long a running job waits for an unreachable database (a restart, a failover) before its attempt fails.
DB_OUTAGE_S = env_int("ANNEAL_DB_OUTAGE_S", 120, minimum=0)

# Deployments (anneal.deployments): price in USD per million tokens (prompt + completion) and requests per
# minute per API key, for each tier; a team's default monthly cap (0: none); the /v1 request limits; the
# regression gate's largest allowed drop in mean score (0-1) on any held-out domain or the general set.
DEPLOY_PRICE_PER_MTOK = {
    tier: env_decimal(f"ANNEAL_PRICE_{tier.upper()}_PER_MTOK", default, minimum="0", maximum="100000")
    for tier, default in (("batch", "0.10"), ("standard", "0.20"), ("turbo", "0.60"))
}
DEPLOY_RATE_LIMIT_RPM = {
    tier: env_int(f"ANNEAL_RATE_LIMIT_{tier.upper()}_RPM", default, minimum=1, maximum=1_000_000)
    for tier, default in (("batch", 60), ("standard", 600), ("turbo", 1200))
}
DEPLOY_TEAM_BUDGET_USD = env_decimal("ANNEAL_TEAM_BUDGET_USD", "0", minimum="0", maximum="1000000000")
DEPLOY_MAX_REQUEST_KB = env_int("ANNEAL_V1_MAX_REQUEST_KB", 512, minimum=1, maximum=100_000)
DEPLOY_MAX_TOKENS = env_int("ANNEAL_V1_MAX_TOKENS", 1024, minimum=1, maximum=1_000_000)
DEPLOY_GATE_MAX_DROP = float(env_decimal("ANNEAL_GATE_MAX_DROP", "0.05", minimum="0", maximum="1"))
DEPLOY_GATE_MAX_ROWS = env_int("ANNEAL_GATE_MAX_ROWS", 64, minimum=1, maximum=100_000)
DEPLOY_REPLICA_START_TIMEOUT_S = env_int("ANNEAL_REPLICA_START_TIMEOUT_S", 180, minimum=5)
DEPLOY_REPLICA_HEARTBEAT_TIMEOUT_S = env_int("ANNEAL_REPLICA_HEARTBEAT_TIMEOUT_S", 60, minimum=10)
# The reaper looks twice per timeout: a replica lost with its worker is replaced within 1.5 timeouts.
CELERY_BEAT_SCHEDULE["reap-stale-replicas"]["schedule"] = min(30.0, DEPLOY_REPLICA_HEARTBEAT_TIMEOUT_S / 2)
DEPLOY_BATCH_MAX_LINES = env_int("ANNEAL_BATCH_MAX_LINES", 50_000, minimum=1, maximum=10_000_000)
# Replicas run the CPU server (gpu_jobs.serving, transformers) or, on GPU hosts, vLLM's OpenAI server.
DEPLOY_SERVING_BACKEND = env_choice("ANNEAL_SERVING_BACKEND", "cpu", ("cpu", "vllm"))
# The address a serve worker's replicas listen on, and the one each replica records for web's /v1 proxy to call.
# Loopback (the default) needs web on the same host; on a cluster, bind 0.0.0.0 and the replica records this
# host's own address (ANNEAL_SERVE_ADVERTISE_HOST, e.g. a pod's IP; by default the address the host's name
# resolves to). Replicas answer only calls that carry their credential.
DEPLOY_SERVE_BIND_HOST = env_ip("ANNEAL_SERVE_BIND_HOST", "127.0.0.1")
DEPLOY_SERVE_ADVERTISE_HOST = env_ip("ANNEAL_SERVE_ADVERTISE_HOST", "")
# MiB each CPU replica keeps for the KV cache of prompt prefixes that requests share (0: off; vLLM manages its
# own, in GPU memory).
DEPLOY_PREFIX_CACHE_MB = env_int("ANNEAL_PREFIX_CACHE_MB", 512, minimum=0, maximum=1_000_000)
# What Django reads into memory as request.body or form fields: enough for the largest /v1 request allowed.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(int(2.5 * 1024 * 1024), DEPLOY_MAX_REQUEST_KB * 1024)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# Dash apps (frontend/dash) are embedded in pages as same-origin iframes, with their JS served from here.
X_FRAME_OPTIONS = "SAMEORIGIN"
PLOTLY_DASH = {"serve_locally": True, "cache_arguments": False}
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "django_plotly_dash.finders.DashAssetFinder",
    "django_plotly_dash.finders.DashComponentFinder",
    "django_plotly_dash.finders.DashAppDirectoryFinder",
]

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# Plotly's browser bundle ships inside the plotly package: served locally, no CDN (machines may be offline).
STATICFILES_DIRS = [FRONTEND_DIR / "static", ("vendor/plotly", Path(plotly.__file__).parent / "package_data")]
WHITENOISE_USE_FINDERS = DEBUG  # in development, serve straight from the source folders

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "anneal.accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "anneal.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "anneal.api_errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": ["anneal.throttles.ApiUserThrottle", "anneal.throttles.ApiAnonThrottle"],
}
# REST API calls per minute per user (a token counts as its user) and per address when signed out; sign-in is
# refused for a username from one address after LOGIN_MAX_FAILURES failures, until LOGIN_LOCKOUT_S have passed
# since the first of them (anneal.throttles).
API_RATE_PER_MIN = env_int("ANNEAL_API_RATE_PER_MIN", 1200, minimum=1, maximum=1_000_000)
API_ANON_RATE_PER_MIN = env_int("ANNEAL_API_ANON_RATE_PER_MIN", 120, minimum=1, maximum=1_000_000)
LOGIN_MAX_FAILURES = env_int("ANNEAL_LOGIN_MAX_FAILURES", 5, minimum=1, maximum=1000)
LOGIN_LOCKOUT_S = env_int("ANNEAL_LOGIN_LOCKOUT_S", 900, minimum=10, maximum=86_400)

# Behind TLS (by default when ANNEAL_BASE_URL is https://) and not in DEBUG: cookies go over HTTPS only and
# browsers are told to use HTTPS for a year (HSTS). A proxy that ends TLS must send X-Forwarded-Proto and be
# trusted with ANNEAL_TRUST_X_FORWARDED_PROTO (only when it overwrites that header from clients).
TLS = env_bool("ANNEAL_TLS", BASE_URL.startswith("https://"))
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = TLS and not DEBUG
SECURE_HSTS_SECONDS = env_int("ANNEAL_HSTS_SECONDS", 31_536_000, minimum=0) if TLS and not DEBUG else 0
if env_bool("ANNEAL_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_HTTPONLY = True

SPECTACULAR_SETTINGS = {
    "TITLE": "Anneal API",
    "DESCRIPTION": "Datasets, verifiers, RL post-training jobs and their live events, checkpoints and their "
    "model cards, deployments. Authenticate with `Authorization: Bearer <token>` (a personal API token bound to "
    "one team). Every write may carry an `Idempotency-Key` header: sent again, it gets the first answer back.\n\n"
    "A deployment serves an **OpenAI-compatible API at `/v1`** (`/v1/chat/completions`, `/v1/completions`, "
    "`/v1/models`, `/v1/files`, `/v1/batches`), authenticated with a deployment key (`sk-anneal-…`, made on "
    "the deployment's page or with `POST /api/v1/deployments/keys`); point the openai client's `base_url` at "
    "`<site>/v1`. A model without a chat template (the tiny model) takes a one-message chat as its bare text, "
    "so `/v1/completions` with the raw prompt is the exact form; refusals use OpenAI's error shape, and a "
    "reached spending cap is `429 insufficient_quota` naming the cap and where it is changed.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR")),
    },
}
