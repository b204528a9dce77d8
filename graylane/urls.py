from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import AllowAny

from graylane import health
from metrics import exporter

# Errors Django answers itself: JSON under /api/ and /nacos/, its pages elsewhere.
handler400 = "graylane.api_errors.bad_request"
handler403 = "graylane.api_errors.permission_denied"
handler404 = "graylane.api_errors.page_not_found"
handler500 = "graylane.api_errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("api/v1/", include("graylane.api_urls")),
    path("nacos/", include("embedded_registry.urls")),
    # The API description is public, like the contract it documents.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    # The split view serves its start-up script from a URL: the Content-Security-Policy
    # allows no inline script.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="schema", permission_classes=[AllowAny], template_name="api/docs.html"
        ),
        name="api-docs",
    ),
    # Where browsers look for an icon on pages that name none (the admin's, an API answer).
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", exporter.metrics, name="prometheus-metrics"),
    path("gateways/", include("gateways.urls")),
    path("", include("dashboard.urls")),
]
