from django.apps import AppConfig


class AdmissionConfig(AppConfig):
    name = "apps.admission"
    label = "admission"
    default_auto_field = "django.db.models.BigAutoField"
