from django.apps import AppConfig


class AdmissionConfig(AppConfig):
    name = "apps.admission"
    label = "admission"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The adopter (a lower layer) cannot import admission: it calls the hooks registered here
        # when it sees a job, so a stamped job confirms its pending admission (apps/admission/pending.py).
        from apps.admission.pending import confirm_hook
        from apps.policies.adoption import admission_hooks

        if confirm_hook not in admission_hooks:
            admission_hooks.append(confirm_hook)
