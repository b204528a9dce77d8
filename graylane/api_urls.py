"""Every REST endpoint of the public contract (../shared/contracts/api-v1.md), one router."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from registry_sync import api as registry_api
from releases import api as releases_api

router = SimpleRouter()
router.register("revisions", releases_api.RevisionViewSet, basename="revision")
router.register("audit", releases_api.AuditViewSet, basename="audit")
router.register("services", registry_api.ServiceViewSet, basename="service")
router.register("instances", registry_api.InstanceViewSet, basename="instance")
router.register("registries", registry_api.RegistryViewSet, basename="registry")

urlpatterns = [
    path("policy/", releases_api.PolicyView.as_view(), name="policy"),
    path("simulate/", releases_api.SimulateView.as_view(), name="simulate"),
    path(
        "services/<str:name>/instances/",
        registry_api.ServiceInstancesView.as_view(),
        name="service-instances",
    ),
    *router.urls,
    path("", include("gateways.api_urls")),
]
