"""Settings for every environment. Everything comes from the environment with embedded defaults.

There is nothing only-in-production here: production differs by the values of the variables
listed in ``.env.example`` (``DEBUG=false``, a real ``SECRET_KEY``, ``DATABASE_URL`` ...).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_float, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

# --- general -------------------------------------------------------------------------------------
DEBUG = env_bool("DEBUG", default=False)
_INSECURE_KEY = "insecure-dev-key-change-me-0123456789abcdefghijklmnopqrstuvwxyz"
# Every key that has ever shipped in this repository (settings, docker-compose.yml, .env.example,
# deploy/): anyone can read them, so a server signing sessions with one can be impersonated.
WELL_KNOWN_SECRET_KEYS = frozenset(
    {
        _INSECURE_KEY,
        "change-me-in-production-0123456789abcdefghijklmnopqrstuvwxyz",
        "change-me",
        "replace-with-50-random-characters",
    }
)
SECRET_KEY_MIN_LENGTH = 32
# Commands that sign nothing and serve nobody of the control plane run without a secret: pipelines
# call render_policy and validate_policy with no configuration at all, the image build runs
# collectstatic, and the simulated cluster (simcluster, sim_fault) is a separate program.
# Commands that sign nothing (makemigrations only compares models with migration files).
KEYLESS_COMMANDS = frozenset(
    {"render_policy", "validate_policy", "collectstatic", "makemigrations", "simcluster", "sim_fault"}
)


def secret_key_problem(key: str) -> str | None:
    """Why ``key`` must not sign sessions in production, or None when it is fine."""
    if not key:
        return "SECRET_KEY is not set"
    if key in WELL_KNOWN_SECRET_KEYS or key.startswith("django-insecure"):
        return "SECRET_KEY is a well-known example value from this repository or Django"
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < 5:
        return f"SECRET_KEY is too short or too uniform (at least {SECRET_KEY_MIN_LENGTH} random characters)"
    return None


def _keyless_command(argv: list[str]) -> bool:
    return len(argv) > 1 and Path(argv[0]).name == "manage.py" and argv[1] in KEYLESS_COMMANDS


SECRET_KEY = env_secret("SECRET_KEY", default="")
_key_problem = secret_key_problem(SECRET_KEY)
if _key_problem and not DEBUG and not _keyless_command(sys.argv):
    # Refuse at import, in every process (web, worker, beat, ingester...), before anything is signed.
    raise ImproperlyConfigured(
        f"{_key_problem}. With DEBUG=false the control plane needs its own secret: set SECRET_KEY "
        "(or SECRET_KEY_FILE) to 50 random characters, e.g. the output of "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'. DEBUG=true (local runs only) "
        "uses a development key."
    )
if _key_problem:
    SECRET_KEY = _INSECURE_KEY  # DEBUG, or a command that signs nothing
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served locally: no CDN anywhere
    "channels",
    "axes",  # sign-in throttling (apps.accounts.login_guard)
    "django_prometheus",  # request metrics (the middleware below), served at /metrics
    "apps.core",
    "apps.jobs",
    "apps.policies",
    "apps.audit",
    "apps.events",
    "apps.accounts",
    "apps.decisions",
    "apps.ingest",
    "apps.admission",
    "apps.advice",
    "apps.fleet",
    "apps.web",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",  # first and last: times the whole stack
    "apps.core.middleware.RequestIdMiddleware",  # first: every response, even a redirect, carries the id
    "apps.core.body_limit.BodyLimitMiddleware",  # an oversized body is refused before anything reads it
    "apps.core.csp.ContentSecurityPolicyMiddleware",
    # /livez, /readyz, /healthz for the kubelet (Host: <pod IP>): before any Host validation or redirect.
    "apps.core.probes.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out sign-in into a 429 page
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

# Every request body, API and admission alike (apps/core/body_limit.py): 3 MiB is the API server's own
# request limit, so no AdmissionReview is larger; policies and manifests (at most 1 M characters) fit.
REQUEST_BODY_MAX_BYTES = env_int("REQUEST_BODY_MAX_BYTES", 3 * 1024 * 1024, minimum=1024)
# The same limit where Django reads a body itself (request.body, forms).
DATA_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES

# The admission webhook's routes exist only in a process started with ADMISSION_WEBHOOK=true (the
# admission Deployment, `manage.py serve_admission`: TLS with client certificates); the public web
# pods answer /admission/... with 404 (issue #24).
ADMISSION_WEBHOOK = env_bool("ADMISSION_WEBHOOK", default=False)
ROOT_URLCONF = "controlplane.admission_urls" if ADMISSION_WEBHOOK else "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"
# HTTP runs Django's WSGI handler on this many threads inside the ASGI server (a2wsgi), websockets run
# on Channels. Django's own ASGI handler sends every request through one thread per process, so a
# request waiting on PostgreSQL blocks the next: bench/bench_api.py measured bare 568 -> 1,997 req/s
# and job detail 228 -> 295-405 req/s with the thread pool. As many threads as pooled database
# connections (DB_POOL_MAX), so no thread waits for one. 0 = Django's ASGI handler.
HTTP_THREADS = env_int("HTTP_THREADS", 8, minimum=0)
WSGI_APPLICATION = "controlplane.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database ------------------------------------------------------------------------------------
# SQLite under ./var/ is the embedded default; PostgreSQL via DATABASE_URL in production and tests.
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'controlplane.sqlite3'}")
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
except ValueError as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a database URL Django understands: {exc}") from exc
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the web server, workers and ingester share one SQLite file.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_POOL", default=True):
    # One process-wide pool (psycopg_pool) for every thread of a process: the HTTP threads, the
    # websocket consumers' database threads and (with HTTP_THREADS=0) Django's ASGI handler, whose
    # threads come and go, so per-thread persistent connections would pile up.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env_int("DB_POOL_MIN", 1, minimum=0),
        "max_size": env_int("DB_POOL_MAX", 8, minimum=1),
        "timeout": 10,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool(
    "DB_PREPARED_STATEMENTS", default=True
):
    # Parameters bound by the server, and a statement run DB_PREPARE_THRESHOLD times on a connection
    # prepared there, so PostgreSQL plans it once per connection instead of on every execution. For
    # the job detail's two statements planning was most of PostgreSQL's CPU: 0.27-0.37 + 0.57-0.81 ms
    # -> 0.18 + 0.23 ms (the backend's CPU over 1,000 runs of each, #26); over HTTP PostgreSQL's
    # CPU per detail went 1.6 -> 0.43-0.56 ms (bench/bench_api.py, cpu_ms_by_role). Off behind a
    # PgBouncer older than 1.21 in transaction mode, which cannot keep a prepared statement.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        server_side_binding=True, prepare_threshold=env_int("DB_PREPARE_THRESHOLD", 5, minimum=0)
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis, celery, channels -------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# At-least-once: a task is acknowledged after it ran, and re-queued when its worker dies mid-way.
CELERY_TASK_ACKS_LATE = env_bool("CELERY_TASK_ACKS_LATE", default=True)
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 1, minimum=1)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240, minimum=10)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=20)
# Must exceed the longest task, or Redis re-delivers a task that is still running.
# The socket timeouts bound every broker call: a Redis that accepts connections but never answers
# (hung, or a half-open path) used to hold the request that queued a push for minutes.
BROKER_TIMEOUT_SECONDS = env_float("BROKER_TIMEOUT_SECONDS", 3.0, minimum=0.1)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=CELERY_TASK_TIME_LIMIT + 60),
    "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
    "socket_timeout": BROKER_TIMEOUT_SECONDS,
}
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_TIMEOUT_SECONDS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_PUSH_QUEUE = env_str("CELERY_PUSH_QUEUE", "push")
CELERY_SLOW_QUEUE = env_str("CELERY_SLOW_QUEUE", "slow")
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "policies.push_policy": {"queue": CELERY_PUSH_QUEUE},
    "policies.sweep_syncs": {"queue": CELERY_SLOW_QUEUE},
    "policies.reconcile_drift": {"queue": CELERY_SLOW_QUEUE},
    "jobs.check_clusters": {"queue": CELERY_SLOW_QUEUE},
    "decisions.write": {"queue": CELERY_PUSH_QUEUE},
    "decisions.expire": {"queue": CELERY_PUSH_QUEUE},
    "decisions.sweep": {"queue": CELERY_SLOW_QUEUE},
    "advice.refresh_summaries": {"queue": CELERY_SLOW_QUEUE},
    "fleet.refresh_scheduled": {"queue": CELERY_SLOW_QUEUE},
    "fleet.prune_history": {"queue": CELERY_SLOW_QUEUE},
    "events.sweep_webhooks": {"queue": CELERY_SLOW_QUEUE},
    "admission.recreate": {"queue": CELERY_PUSH_QUEUE},
    "admission.sweep_recreates": {"queue": CELERY_SLOW_QUEUE},
}


def _every(task: str, seconds: float) -> dict[str, object]:
    """A beat entry that expires after one interval: a run still queued when the next is due (workers
    down, a backlog) is dropped rather than run late, so an outage does not end in a burst of sweeps."""
    return {"task": task, "schedule": seconds, "options": {"expires": seconds}}


CELERY_BEAT_SCHEDULE = {
    "sweep-decisions": _every("decisions.sweep", env_float("DECISION_SWEEP_SECONDS", 5.0)),
    "check-clusters": _every("jobs.check_clusters", env_float("CLUSTER_CHECK_SECONDS", 30.0)),
    "sweep-stuck-syncs": _every("policies.sweep_syncs", env_float("SWEEP_INTERVAL_SECONDS", 15.0)),
    "reconcile-drift": _every("policies.reconcile_drift", env_float("RECONCILE_INTERVAL_SECONDS", 60.0)),
    # The jobs list's "could save" column (issue #18): re-priced after new incidents.
    "refresh-advice": _every("advice.refresh_summaries", env_float("ADVICE_REFRESH_SECONDS", 60.0)),
    # The fleet view (issue #26): NPU time scheduled today; old events, incidents and audit pruned.
    "fleet-scheduled": _every("fleet.refresh_scheduled", env_float("FLEET_SCHEDULED_SECONDS", 300.0)),
    "prune-history": _every("fleet.prune_history", env_float("RETENTION_PRUNE_SECONDS", 3600.0)),
    "sweep-webhooks": _every("events.sweep_webhooks", env_float("WEBHOOK_SWEEP_SECONDS", 15.0)),
    "sweep-recreates": _every("admission.sweep_recreates", env_float("RECREATE_SWEEP_SECONDS", 15.0)),
    "expire-admissions": _every("admission.expire_pending", env_float("ADMISSION_EXPIRE_SECONDS", 60.0)),
}

# --- supervised threads (apps.core.supervision): restart after a crash, readiness, metrics -------
SUPERVISOR_BACKOFF_INITIAL_SECONDS = env_float("SUPERVISOR_BACKOFF_INITIAL_SECONDS", 0.5, minimum=0.01)
SUPERVISOR_BACKOFF_MAX_SECONDS = env_float("SUPERVISOR_BACKOFF_MAX_SECONDS", 30.0, minimum=0.01)
# Not ready while a thread has crashed this many times in a row (and has not run well since) ...
SUPERVISOR_CRASH_LOOP_FAILURES = env_int("SUPERVISOR_CRASH_LOOP_FAILURES", 3, minimum=1)
# ... where a run this long counts as well: the next crash starts a new count.
SUPERVISOR_HEALTHY_AFTER_SECONDS = env_float("SUPERVISOR_HEALTHY_AFTER_SECONDS", 60.0, minimum=0.1)

# --- the shared cache: DRF's throttle counts, shared by every web process (issue #24) ------------
# Its own key prefix in Redis, so a clear() deletes only these keys (apps.core.cache), not the
# broker's queues that share REDIS_URL by default. Each call is bounded: a Redis that does not
# answer costs a request CACHE_TIMEOUT_SECONDS, then the throttle lets it through (and logs).
CACHE_TIMEOUT_SECONDS = env_float("CACHE_TIMEOUT_SECONDS", 0.5, minimum=0.05)
CACHES: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "apps.core.cache.PrefixedRedisCache",
        "LOCATION": env_str("CACHE_URL", REDIS_URL),
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "cp-cache"),
        "OPTIONS": {
            "socket_connect_timeout": CACHE_TIMEOUT_SECONDS,
            "socket_timeout": CACHE_TIMEOUT_SECONDS,
        },
    }
}

# --- recreate (design §4.6): a recorded operation run by a task, finished by the sweep -------------
RECREATE_DELETE_WAIT_SECONDS = env_float("RECREATE_DELETE_WAIT_SECONDS", 30.0, minimum=1.0)
RECREATE_BACKOFF_BASE_SECONDS = env_float("RECREATE_BACKOFF_BASE_SECONDS", 0.5, minimum=0.0)
RECREATE_BACKOFF_MAX_SECONDS = env_float("RECREATE_BACKOFF_MAX_SECONDS", 10.0, minimum=0.01)
# Retries of one task run; then the operation waits for the sweep (it stays active, never dropped).
RECREATE_TASK_RETRIES = env_int("RECREATE_TASK_RETRIES", 5, minimum=0)
# An active operation nobody advanced for this long is queued again; longer than the delete wait.
RECREATE_STALL_SECONDS = env_float("RECREATE_STALL_SECONDS", 60.0, minimum=RECREATE_DELETE_WAIT_SECONDS + 1)

# --- push pipeline -------------------------------------------------------------------------------
PUSH_LEASE_SECONDS = env_int("PUSH_LEASE_SECONDS", 120, minimum=5)
PUSH_RETRY_BUDGET_SECONDS = env_float("PUSH_RETRY_BUDGET_SECONDS", 90.0, minimum=1.0)
PUSH_MAX_CONFLICTS = env_int("PUSH_MAX_CONFLICTS", 10, minimum=1)
PUSH_BACKOFF_BASE_SECONDS = env_float("PUSH_BACKOFF_BASE_SECONDS", 0.2, minimum=0.0)
PUSH_BACKOFF_MAX_SECONDS = env_float("PUSH_BACKOFF_MAX_SECONDS", 5.0, minimum=0.01)
PUSH_PENDING_GRACE_SECONDS = env_int("PUSH_PENDING_GRACE_SECONDS", 30, minimum=1)
PUSH_FAILED_RETRY_SECONDS = env_int("PUSH_FAILED_RETRY_SECONDS", 60, minimum=1)

CHANNEL_LAYERS: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [env_str("CHANNEL_LAYER_URL", REDIS_URL)],
            # Deliberate: a browser that falls this far behind is told to resync over REST.
            "capacity": env_int("CHANNEL_LAYER_CAPACITY", 1_000, minimum=10),
            "expiry": 60,
        },
    }
}

# --- clusters ------------------------------------------------------------------------------------
# When KUBECONFIG is set, its current context is registered as the default cluster at start-up.
KUBECONFIG = env_str("KUBECONFIG", "")
# Running inside the cluster it manages: register that cluster (service-account credentials).
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", default=False)
CLUSTERD_ADDRESS = env_str("CLUSTERD_ADDRESS", "")

# --- auth, i18n, static --------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "web:login"
# Sign-in throttling (django-axes, issue #16): after LOGIN_FAILURE_LIMIT failures for one username,
# or from one address, further sign-ins for it are refused (429) for LOGIN_LOCKOUT_MINUTES; a success
# before the limit resets the count. Counts live in the database, shared by every web process.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.login_guard.LoginGuardBackend",
    "django.contrib.auth.backends.ModelBackend",  # local accounts: kept for break-glass
    "apps.accounts.oidc.backend.OidcBackend",  # inert unless OIDC_ENABLED
]
# --- sign-in with the company's identity provider (OpenID Connect, apps/accounts/oidc/) -----------
# On when OIDC_RP_CLIENT_ID is set. Endpoints from OIDC_OP_DISCOVERY_URL (the issuer's
# /.well-known/openid-configuration) or each OIDC_OP_* variable; ID tokens signed with RS256 and
# checked against the provider's JWKS. OIDC_GROUP_ROLES maps the groups claim to namespace roles:
# '{"ml-team-a": {"team-a": "editor"}, "sre": {"*": "admin"}}' (apps/accounts/oidc/group_roles.py).
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_RP_CLIENT_SECRET", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your identity provider")
OIDC_OP_DISCOVERY_URL = env_str("OIDC_OP_DISCOVERY_URL", "")
OIDC_OP_ISSUER = env_str("OIDC_OP_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_ROLES = env_str("OIDC_GROUP_ROLES", "{}")
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT_SECONDS", 10.0, minimum=0.5)
OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", default=True)
OIDC_CREATE_USER = True
OIDC_STORE_ID_TOKEN = False  # nothing of the provider's tokens is kept in the session
LOGIN_REDIRECT_URL = "/"
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each one its own counter
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "apps.accounts.login_guard.client_ip"
AXES_VERBOSE = False
# Active (unrevoked, unexpired) API tokens one user may hold.
API_TOKENS_PER_USER = env_int("API_TOKENS_PER_USER", 50, minimum=1)
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- REST framework ------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate challenge makes anonymous requests a 401, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.core.parsers.SafeJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "EXCEPTION_HANDLER": "apps.core.api_errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "apps.core.api_schema.ErrorAwareAutoSchema",
    # Fairness: one bucket per token (per user for sessions, per address when anonymous).
    # Plus one bucket per user over all its tokens: minting tokens must not multiply the budget.
    "DEFAULT_THROTTLE_CLASSES": [
        "apps.accounts.throttling.TokenRateThrottle",
        "apps.accounts.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "token": env_str("API_THROTTLE_RATE", "1200/min"),
        "user": env_str("API_USER_THROTTLE_RATE", "2400/min"),
    },
    "NUM_PROXIES": env_int("API_NUM_PROXIES", 0, minimum=0) or None,
}
# Each web process keeps the API token lookups it made and drops them when PostgreSQL announces a
# change to tokens, users or grants (apps/accounts/token_cache.py); false = every request asks the
# database. Off by itself where notices cannot be proven to arrive (a pooler that drops them).
AUTH_TOKEN_CACHE = env_bool("AUTH_TOKEN_CACHE", default=True)
# /api/schema/ and /api/docs/ map every endpoint of a multi-tenant control plane: for signed-in users
# (session or token) by default; true = anyone who reaches the port (docs/openapi.yaml is the same).
API_DOCS_PUBLIC = env_bool("API_DOCS_PUBLIC", default=False)
# Only for bench/bench_api.py: adds a bare DRF view under /api/v1/_bench/ as its baseline.
BENCH_ENDPOINTS = env_bool("BENCH_ENDPOINTS", default=False)
SPECTACULAR_SETTINGS = {
    "TITLE": "MindCluster recovery-policy control plane API",
    "DESCRIPTION": "Validate, render, set and push MindCluster fault-recovery policies (design.md §4.2).",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RoleEnum": "apps.accounts.models.Role",
        "SyncStateEnum": "apps.policies.models.PolicySync.State",
        "RevisionSourceEnum": "apps.policies.models.PolicyRevision.Source",
        "JobFrameworkEnum": "apps.jobs.models.TrainingJob.Framework",
        "JobSourceEnum": "apps.jobs.models.TrainingJob.Source",
        "EventSeverityEnum": "apps.events.models.JobEvent.Severity",
        "IssueSeverityEnum": ["error", "warning"],
        "PlatformStrategyEnum": "apps.policies.spec.PLATFORM_STRATEGIES",
        "DecisionActionEnum": "apps.policies.spec.DECISION_ACTIONS",
        "WebhookKindEnum": "apps.events.models.Webhook.Kind",
        "WebhookDeliveryStateEnum": "apps.events.models.WebhookDelivery.State",
    },
}

# --- security (production values come from the environment) -----------------------------------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", default=False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
if env_bool("SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Appended to the Content-Security-Policy (apps/core/csp.py), e.g. "report-uri https://…".
CONTENT_SECURITY_POLICY_EXTRA = env_str("CONTENT_SECURITY_POLICY_EXTRA", "")
# Addresses of proxies whose X-Request-ID is kept; from anyone else the id is always ours.
REQUEST_ID_TRUSTED_PROXIES = env_list("REQUEST_ID_TRUSTED_PROXIES", [])

# --- logging -------------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
# json (production default) or plain (the default with DEBUG, for a person reading a terminal).
LOG_FORMAT = env_str("LOG_FORMAT", "plain" if DEBUG else "json").lower()
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, not {LOG_FORMAT!r}")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "apps.core.middleware.RequestIdLogFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        # One JSON object a line (python-json-logger), for a log shipper: the same fields, named.
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(request_id)s %(process)d %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# --- events: ingester, websocket, webhooks, metrics (apps.events; keep this block last) ----------
# Channel layer capacity (above, CHANNEL_LAYER_CAPACITY, default 1000 per consumer channel): about
# 5 s of a 200 events/s job. A browser further behind than that loses frames in Redis, which the
# consumer notices (seq gap, or its periodic head check) and repairs from the database, or answers
# with a resync when more than EVENTS_WS_MAX_REPLAY events are missing. Consumers re-join their groups
# on every check, so a short group expiry only cleans up after servers that died.
CHANNEL_LAYERS["default"]["CONFIG"]["group_expiry"] = env_int("CHANNEL_LAYER_GROUP_EXPIRY", 3600, minimum=60)
# Fan-out: the pub/sub layer publishes a group message once and each server process hands it to its
# own sockets in memory; the list-based layer above pushes one copy per socket through Redis (100
# sockets x 200 events/s = 20,000 Redis round trips/s into one process: measured seconds of lag and
# dropped frames, bench/bench_events.py). Its per-socket bound is EVENTS_WS_MAX_LAG_SECONDS instead of
# a message count: a socket whose frames are that old gets a resync and its backlog is dropped.
# CHANNEL_LAYER_BACKEND=core restores the list-based layer (and the capacity above).
if env_str("CHANNEL_LAYER_BACKEND", "pubsub") == "pubsub":
    CHANNEL_LAYERS["default"]["BACKEND"] = "channels_redis.pubsub.RedisPubSubChannelLayer"
    CHANNEL_LAYERS["default"]["CONFIG"] = {"hosts": CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]}
EVENTS_WS_MAX_LAG_SECONDS = env_float("EVENTS_WS_MAX_LAG_SECONDS", 5.0, minimum=0.1)
EVENTS_WS_MAX_REPLAY = env_int("EVENTS_WS_MAX_REPLAY", 1000, minimum=1)
EVENTS_WS_CHECK_SECONDS = env_float("EVENTS_WS_CHECK_SECONDS", 1.5, minimum=0.05)
EVENTS_WS_SUMMARY_SECONDS = env_float("EVENTS_WS_SUMMARY_SECONDS", 0.25, minimum=0.01)
# Issue #16: how often an open socket's token/user/session/grants are rechecked, and per-socket
# subscribe limits (jobs followed at once; a token bucket of subscribes, each may replay 1,000 events).
EVENTS_WS_ACCESS_CHECK_SECONDS = env_float("EVENTS_WS_ACCESS_CHECK_SECONDS", 5.0, minimum=0.05)
EVENTS_WS_MAX_SUBSCRIPTIONS = env_int("EVENTS_WS_MAX_SUBSCRIPTIONS", 100, minimum=1)
EVENTS_WS_SUBSCRIBE_BURST = env_int("EVENTS_WS_SUBSCRIBE_BURST", 20, minimum=1)
EVENTS_WS_SUBSCRIBE_RATE = env_float("EVENTS_WS_SUBSCRIBE_RATE", 1.0, minimum=0.01)
# A socket with this many live frames queued is behind: runs of fault reports and warnings are sent
# as one "coalesced" frame (exact seq range, kinds counted); other kinds always go out one by one.
EVENTS_WS_COALESCE_AFTER = env_int("EVENTS_WS_COALESCE_AFTER", 50, minimum=2)
# The ingester and the decider list the clusters again this often: one added later (API, admin, the
# default one another process registers) is competed for, one removed is let go (apps/jobs/clusters.py).
CLUSTER_RESCAN_SECONDS = env_float("CLUSTER_RESCAN_SECONDS", 10.0, minimum=0.1)
EVENTS_INGEST_REORDER_SECONDS = env_float("EVENTS_INGEST_REORDER_SECONDS", 1.0, minimum=0.0)
EVENTS_INCIDENT_LATE_SECONDS = env_float("EVENTS_INCIDENT_LATE_SECONDS", 10.0, minimum=0.0)
EVENTS_WATCH_TIMEOUT_SECONDS = env_int("EVENTS_WATCH_TIMEOUT_SECONDS", 60, minimum=1)
EVENTS_INGEST_BACKOFF_MAX_SECONDS = env_float("EVENTS_INGEST_BACKOFF_MAX_SECONDS", 30.0, minimum=0.1)
# Items watched but not yet stored; a full queue makes the watch threads wait (back-pressure).
EVENTS_INGEST_QUEUE = env_int("EVENTS_INGEST_QUEUE", 10_000, minimum=100)
# The cap of the backoff between retries while the database is unreachable (retried without limit).
EVENTS_INGEST_DB_RETRY_MAX_SECONDS = env_float("EVENTS_INGEST_DB_RETRY_MAX_SECONDS", 5.0, minimum=0.1)
# After a (re)start or take-over the replayed backlog of every watch arrives at once: the ordering hold
# is this long (instead of EVENTS_INGEST_REORDER_SECONDS) ...
EVENTS_INGEST_WARMUP_WINDOW_SECONDS = env_float("EVENTS_INGEST_WARMUP_WINDOW_SECONDS", 3.0, minimum=0.0)
# ... until this long after every watch delivered its first batch.
EVENTS_INGEST_WARMUP_SECONDS = env_float("EVENTS_INGEST_WARMUP_SECONDS", 3.0, minimum=0.0)
# --- retention (issue #26): raw history kept this many days (92: a quarter), then pruned in batches of
# RETENTION_BATCH_ROWS rows, one short transaction each, by the beat task above. The fleet summaries
# (apps.fleet) are kept: the fleet view reads them, not the raw rows.
RETENTION_EVENTS_DAYS = env_int("RETENTION_EVENTS_DAYS", 92, minimum=1)
RETENTION_INCIDENTS_DAYS = env_int("RETENTION_INCIDENTS_DAYS", 92, minimum=1)
RETENTION_AUDIT_DAYS = env_int("RETENTION_AUDIT_DAYS", 92, minimum=1)
RETENTION_BATCH_ROWS = env_int("RETENTION_BATCH_ROWS", 5_000, minimum=1)
# Batches per table per run: a run ends in bounded time; the next one continues.
RETENTION_MAX_BATCHES = env_int("RETENTION_MAX_BATCHES", 1_000, minimum=1)
WEBHOOK_TIMEOUT_SECONDS = env_float("WEBHOOK_TIMEOUT_SECONDS", 5.0, minimum=0.1)
# Loopback, link-local and private webhook targets are refused unless true (events/webhook_urls.py).
WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool("WEBHOOK_ALLOW_PRIVATE_TARGETS", default=False)
WEBHOOK_MAX_ATTEMPTS = env_int("WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
WEBHOOK_BACKOFF_BASE_SECONDS = env_float("WEBHOOK_BACKOFF_BASE_SECONDS", 2.0, minimum=0.0)
WEBHOOK_BACKOFF_MAX_SECONDS = env_float("WEBHOOK_BACKOFF_MAX_SECONDS", 300.0, minimum=0.0)
# A pending delivery whose message was lost (broker down, worker killed) is queued again by the
# sweep this long after it was last queued; also the re-queue lease, so a backlog is not flooded.
WEBHOOK_REQUEUE_SECONDS = env_float("WEBHOOK_REQUEUE_SECONDS", 60.0, minimum=1.0)
# Required for /metrics unless DEBUG. The ingester, decider and workers serve theirs on METRICS_PORT
# (read from the environment by apps/core/metrics.py; unset: not served).
METRICS_TOKEN = env_secret("METRICS_TOKEN", "")
# --- end of events block ------------------------------------------------------------------------

# Admission webhook (issue 15): record the admitted job after answering the API server instead of
# before. Faster answers; but if the job watcher adopts the new job within those milliseconds, the
# job shows an observed revision 1 (same keys) instead of basis "admission". Off by default.
ADMISSION_RECORD_ASYNC = env_bool("ADMISSION_RECORD_ASYNC", default=False)
# serve_admission's TLS (deploy/admission/README.md): the serving pair, re-read when it changes
# (checked this often, and on SIGHUP), and the CA whose client certificates may call the webhook.
ADMISSION_TLS_CERT_FILE = env_str("ADMISSION_TLS_CERT_FILE", "")
ADMISSION_TLS_KEY_FILE = env_str("ADMISSION_TLS_KEY_FILE", "")
ADMISSION_CLIENT_CA_FILE = env_str("ADMISSION_CLIENT_CA_FILE", "")
ADMISSION_TLS_RELOAD_SECONDS = env_float("ADMISSION_TLS_RELOAD_SECONDS", 10.0, minimum=0.1)
# A pending admission (apps/admission/pending.py) the watcher has not seen created within this long
# is marked expired by the beat sweep: the API server rejected the create, or dropped a late answer.
ADMISSION_PENDING_TTL_SECONDS = env_float("ADMISSION_PENDING_TTL_SECONDS", 600.0, minimum=1.0)
