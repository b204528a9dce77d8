from django.urls import path

from dashboard import draft_views, freeze_views, graph_views, lane_views, release_views, views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("service-graph/", graph_views.service_graph, name="service-graph"),
    path("overview/needs-action/", views.needs_action_badges, name="needs-action"),
    path("policy/", views.policy_editor, name="policy"),
    path("lanes/", lane_views.lanes, name="lanes"),
    path("lanes/new/", lane_views.lane_create, name="lane-create"),
    # /edit/: "new" is a lane name too.
    path("lanes/<str:name>/edit/", lane_views.lane_edit, name="lane-edit"),
    path("lanes/<str:name>/delete/", lane_views.lane_delete, name="lane-delete"),
    path("services/", views.services, name="services"),
    # Before the service page, whose <path:> would take the rest as part of the name.
    path(
        "services/<path:name>/quarantine/<str:version>/lift/",
        views.quarantine_lift,
        name="quarantine-lift",
    ),
    path("services/<path:name>/protection/", views.service_protect, name="service-protect"),
    path("services/<path:name>/lifecycle/", views.service_lifecycle, name="service-lifecycle"),
    path(
        "services/<path:name>/instance-traffic/",
        views.service_instance_traffic,
        name="service-instance-traffic",
    ),
    # <path:>: a name stored before names were checked may hold a "/" (registry_sync/adapters/
    # validation.py refuses new ones); the link must still lead to its page.
    path("services/<path:name>/", views.service_detail, name="service"),
    path("drafts/", draft_views.draft_list, name="drafts"),
    path("drafts/<int:pk>/", draft_views.draft_detail, name="draft"),
    path(
        "drafts/<int:pk>/approve/",
        draft_views.draft_decide,
        {"decision": "approve"},
        name="draft-approve",
    ),
    path(
        "drafts/<int:pk>/reject/",
        draft_views.draft_decide,
        {"decision": "reject"},
        name="draft-reject",
    ),
    path("revisions/", views.revisions, name="revisions"),
    path("revisions/<int:n>/", views.revision_detail, name="revision"),
    path("revisions/<int:n>/rollback/", views.rollback, name="rollback"),
    path("instances/<int:pk>/offline/", views.instance_offline, name="instance-offline"),
    path("instances/<int:pk>/online/", views.instance_online, name="instance-online"),
    path("instances/<int:pk>/restart/", views.instance_restart, name="instance-restart"),
    path("audit/", views.audit, name="audit"),
    path("simulate/", views.simulator, name="simulator"),
    path("releases/", release_views.releases, name="releases"),
    path("releases/freezes/", freeze_views.freeze_create, name="freeze-create"),
    path("releases/freezes/<int:pk>/end/", freeze_views.freeze_end, name="freeze-end"),
    path("releases/<int:pk>/", release_views.release_detail, name="release"),
    path("releases/<int:pk>/<slug:action>/", release_views.release_action, name="release-action"),
    path("releases/bundles/", release_views.bundle_create, name="bundle-create"),
    path("releases/bundles/<int:pk>/", release_views.bundle_detail, name="bundle"),
    path(
        "releases/bundles/<int:pk>/<slug:action>/",
        release_views.bundle_action,
        name="bundle-action",
    ),
]
