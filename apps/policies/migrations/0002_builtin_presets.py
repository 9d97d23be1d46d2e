"""Data migration: the built-in presets exist after a fresh ``migrate`` (the install's migration Job).

Before, only ``demo_setup`` loaded them, so a real install had none and a job naming one by annotation
got nothing. Reversing leaves them: user policies may have been made from them.
"""

from typing import Any

from django.db import migrations

from apps.policies.builtin_presets import builtin_presets_load


def load_builtin_presets(apps: Any, schema_editor: Any) -> None:
    builtin_presets_load(apps.get_model("policies", "Preset"))


class Migration(migrations.Migration):
    dependencies = [("policies", "0001_initial")]

    operations = [migrations.RunPython(load_builtin_presets, migrations.RunPython.noop, elidable=False)]
