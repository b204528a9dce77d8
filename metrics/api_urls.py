from django.urls import path

from metrics import api_views

urlpatterns = [
    path("metrics/", api_views.MetricsIngestView.as_view(), name="metrics-ingest"),
    path("metrics/success-rate/", api_views.SuccessRateView.as_view(), name="metrics-success"),
    path("metrics/latency/", api_views.LatencyView.as_view(), name="metrics-latency"),
]
