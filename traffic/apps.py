from django.apps import AppConfig


class TrafficConfig(AppConfig):
    name = "traffic"
    verbose_name = "Traffic samples"
