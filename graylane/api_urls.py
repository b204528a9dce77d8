"""Every REST endpoint of the public contract (docs/api.md), one router."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from audit import api_views as audit_api
from call_graph import api_views as call_graph_api
from graylane.api_root import ApiRootView
from policy import api_views as policy_api
from registry_sync import api_views as registry_api
from releases import api_views as releases_api
from releases import shadow_views, webhook_views

router = SimpleRouter()
router.register("revisions", policy_api.RevisionViewSet, basename="revision")
router.register("audit", audit_api.AuditViewSet, basename="audit")
router.register("services", policy_api.ServiceViewSet, basename="service")
router.register("instances", registry_api.InstanceViewSet, basename="instance")
router.register("registries", registry_api.RegistryViewSet, basename="registry")
router.register("releases", releases_api.ReleaseViewSet, basename="release")
router.register("release-bundles", releases_api.ReleaseBundleViewSet, basename="release-bundle")
router.register("webhooks", webhook_views.WebhookViewSet, basename="webhook")
router.register("freezes", policy_api.FreezeViewSet, basename="freeze")
router.register("policy/drafts", policy_api.PolicyDraftViewSet, basename="policy-draft")

urlpatterns = [
    path("", ApiRootView.as_view(), name="api-root"),
    path("policy/", policy_api.PolicyView.as_view(), name="policy"),
    path("simulate/", policy_api.SimulateView.as_view(), name="simulate"),
    path("lanes/", policy_api.LaneListView.as_view(), name="lanes"),
    path("lanes/<str:name>/", policy_api.LaneDetailView.as_view(), name="lane"),
    path(
        "services/<str:name>/quarantine/<str:version>/",
        policy_api.QuarantineView.as_view(),
        name="service-quarantine",
    ),
    path("call-edges/", call_graph_api.CallEdgesView.as_view(), name="call-edges"),
    path("shadow-comparisons/", shadow_views.ShadowIngestView.as_view(), name="shadow-comparisons"),
    path("lifecycle/", registry_api.LifecycleReportView.as_view(), name="lifecycle"),
    path(
        "services/<path:name>/lifecycle/",
        registry_api.ServiceLifecycleView.as_view(),
        name="service-lifecycle",
    ),
    path(
        "services/<path:name>/instances/",  # a stored name may hold a "/"
        registry_api.ServiceInstancesView.as_view(),
        name="service-instances",
    ),
    *router.urls,
    path("", include("gateways.api_urls")),
    path("", include("metrics.api_urls")),
    path("", include("traffic.api_urls")),
]
