from django.urls import path

from traffic import api_views, preview_api, replay_api

urlpatterns = [
    path("policy/preview/", preview_api.PreviewView.as_view(), name="policy-preview"),
    path("traffic-samples/", api_views.TrafficSamplesView.as_view(), name="traffic-samples"),
    path("traffic-samples/replay/", replay_api.ReplayView.as_view(), name="traffic-replay"),
]
