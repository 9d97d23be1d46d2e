FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .
RUN DJANGO_SETTINGS_MODULE=controlplane.settings.base python manage.py collectstatic --noinput -v 0
EXPOSE 8000
CMD ["python", "-m", "uvicorn", "controlplane.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
