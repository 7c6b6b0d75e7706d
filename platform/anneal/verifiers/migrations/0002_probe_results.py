from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("verifiers", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="verifierversion",
            name="probe_results",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="verifierversion",
            name="flagged",
            field=models.BooleanField(default=False),
        ),
    ]
