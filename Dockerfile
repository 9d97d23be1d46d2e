FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VAR_DIR=/app/var
WORKDIR /app
# The simulated cluster's own dependencies go only into the simulator's image (WITH_SIMULATOR=1).
ARG WITH_SIMULATOR=0
COPY requirements.txt .
COPY simcluster/requirements.txt simcluster-requirements.txt
RUN pip install --no-cache-dir -r requirements.txt \
    && if [ "$WITH_SIMULATOR" = "1" ]; then pip install --no-cache-dir -r simcluster-requirements.txt; fi
COPY . .
# An unprivileged user; /app/var (SQLite, static files) and /kube (a shared kubeconfig) are its own.
RUN useradd --uid 10001 --create-home app \
    && mkdir -p /app/var /kube \
    && DJANGO_SETTINGS_MODULE=controlplane.settings.base python manage.py collectstatic --noinput -v 0 \
    && chown -R 10001:10001 /app/var /kube
USER 10001
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "controlplane.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
