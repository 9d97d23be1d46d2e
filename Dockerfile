# The control plane's image: every process of deploy/ and docker-compose.yml runs from it.
#   docker build -t mindcluster-recovery-control-plane:0.1.0 .
# The simulated cluster (a development tool) is a second target of the same file:
#   docker build --target simulator -t mindcluster-recovery-simcluster:latest .
# Commands (tests/ship/test_image.py keeps them equal to deploy/'s; the CMD is the web one's start):
#   web        python -m uvicorn controlplane.asgi:application --host 0.0.0.0 --port 8000 --workers 1
#   admission  python manage.py serve_admission --host 0.0.0.0 --port 8443 --probe-port 8081
#   worker     celery -A controlplane worker -Q push,slow,default -c 2 -l info
#   beat       celery -A controlplane beat -l info -s /tmp/celerybeat-schedule
#   ingester   python manage.py ingest
#   decider    python manage.py decide --processes 2
#   migrate    python manage.py migrate --noinput

# --- builder: wheels for the runtime requirements only (no compilers reach the runtime image) ---
FROM python:3.11-slim AS builder
WORKDIR /build
COPY requirements.txt runtime.txt
COPY simcluster/requirements.txt simulator.txt
RUN pip wheel --no-cache-dir --wheel-dir /wheels -r runtime.txt \
    && pip wheel --no-cache-dir --wheel-dir /wheels-simulator -r simulator.txt

# --- product: the runtime image's contents, non-root, read-only friendly (writes only to /tmp) ---
FROM python:3.11-slim AS product
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY --from=builder /wheels /wheels
COPY --from=builder /build/runtime.txt /tmp/requirements.txt
RUN pip install --no-index --find-links /wheels -r /tmp/requirements.txt \
    && rm -rf /wheels /tmp/requirements.txt
# The product only: no simulator, tests, benchmarks or docs (and .dockerignore keeps .git, .venv and
# var/ out of the build context altogether).
COPY manage.py ./
COPY controlplane controlplane
COPY apps apps
COPY mindcluster mindcluster
COPY frontend frontend
# Static files are collected at build (whitenoise serves them from /app/var/static, root-owned): the
# pods write only to /tmp (an emptyDir; read-only root). /app/var itself is the app's for Compose.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent app \
    && mkdir -p /app/var /kube \
    && DJANGO_SETTINGS_MODULE=controlplane.settings.base python manage.py collectstatic --noinput -v 0 \
    && chown 10001:10001 /kube /app/var
USER 10001:10001
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "controlplane.asgi:application", "--host", "0.0.0.0", "--port", "8000"]

# --- simulator: the product plus the simulated cluster's own requirements (docker-compose.yml only) ---
FROM product AS simulator
USER 0
COPY --from=builder /wheels-simulator /wheels-simulator
COPY simcluster simcluster
RUN pip install --no-index --find-links /wheels-simulator -r simcluster/requirements.txt \
    && rm -rf /wheels-simulator
USER 10001:10001

# --- runtime (the default target, last): the product as built above ---
FROM product AS runtime
