"""Output shapes of the policy, revisions, services and simulator API (and their OpenAPI
description). Input validation of the policy lives in routing_engine.policy so the form, the
API and gateways share it."""

import ipaddress

from rest_framework import serializers

from policy.drafts import diff_of
from policy.models import Freeze, PolicyDraft, Revision
from registry_sync.models import Service
from routing_engine import MAX_ENTRY_LENGTH


class HeaderRuleSerializer(serializers.Serializer):
    name = serializers.CharField(allow_blank=True)
    value = serializers.CharField(allow_blank=True)


class VersionPairSerializer(serializers.Serializer):
    prod = serializers.CharField()
    gray = serializers.CharField()


class PolicySerializer(serializers.Serializer):
    revision = serializers.IntegerField(read_only=True)
    enabled = serializers.BooleanField()
    routing = serializers.BooleanField()
    header = HeaderRuleSerializer()
    ips = serializers.ListField(child=serializers.CharField())
    cities = serializers.ListField(child=serializers.CharField())
    users = serializers.ListField(child=serializers.CharField())
    user_header = serializers.CharField()
    city_header = serializers.CharField()
    percent = serializers.FloatField(
        min_value=0, max_value=100, help_text="At most two decimals (0.01 % steps)."
    )
    versions = VersionPairSerializer()
    updated_at = serializers.DateTimeField(read_only=True)
    updated_by = serializers.CharField(read_only=True)


class RevisionSerializer(serializers.ModelSerializer):
    revision = serializers.IntegerField(source="number")
    author = serializers.CharField()

    class Meta:
        model = Revision
        fields = ["revision", "checksum", "created_at", "author", "comment", "source"]


class RevisionDetailSerializer(RevisionSerializer):
    config = serializers.JSONField()
    diff = serializers.JSONField()

    class Meta(RevisionSerializer.Meta):
        fields = [*RevisionSerializer.Meta.fields, "rolled_back_from", "config", "diff"]


class RollbackSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, max_length=500)


# Bounds of a simulated request: what a real one could carry (MAX_ENTRY_LENGTH: the longest
# user or city a policy can hold; 8 KiB: a common server limit for one header line).
MAX_HEADERS = 100
MAX_HEADER_NAME = 256
MAX_HEADER_VALUE = 8192
MAX_PATH = 20  # hops of a simulated request


class SimulateRequestSerializer(serializers.Serializer):
    service = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, max_length=255
    )
    headers = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=MAX_HEADER_VALUE), required=False
    )
    ip = serializers.CharField(required=False, allow_blank=True, allow_null=True, max_length=64)
    city = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, max_length=MAX_ENTRY_LENGTH
    )
    user = serializers.CharField(
        required=False, allow_blank=True, allow_null=True, max_length=MAX_ENTRY_LENGTH
    )
    path = serializers.ListField(
        child=serializers.CharField(max_length=255),
        required=False,
        max_length=MAX_PATH,
        help_text="The services the request reaches in turn; it enters at the first.",
    )

    def validate_headers(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_HEADERS:
            raise serializers.ValidationError(f"At most {MAX_HEADERS} headers.")
        for name in value:
            if len(name) > MAX_HEADER_NAME or "\x00" in name:
                raise serializers.ValidationError(
                    f"Header names are at most {MAX_HEADER_NAME} characters, without NUL."
                )
        return value

    def validate_ip(self, value: str | None) -> str | None:
        if value:
            try:
                ipaddress.ip_address(value.strip())
            except ValueError:
                raise serializers.ValidationError(f"{value!r} is not an IP address.") from None
            return value.strip()
        return None


class SimulateHopSerializer(serializers.Serializer):
    service = serializers.CharField()
    asked = serializers.CharField(
        allow_null=True, help_text="The version the request asks for here (null: any)."
    )
    version = serializers.CharField(allow_null=True)
    fallback = serializers.BooleanField(
        help_text="The lane's (or gray) version has no routable instance: prod instead."
    )
    routable = serializers.IntegerField(
        help_text="Routable instances of `version` (any version's when null); 0: the gateway "
        "answers 503."
    )
    in_lane = serializers.BooleanField(
        help_text="The request's lane has a version of this service (gray: always)."
    )


class SimulateResponseSerializer(serializers.Serializer):
    flag = serializers.ChoiceField(choices=["ALL", "PROD", "GRAY"])
    lane = serializers.CharField(allow_null=True, help_text="The lane of a GRAY request.")
    version = serializers.CharField(allow_null=True)
    matched = serializers.CharField(allow_null=True)
    city = serializers.CharField(
        allow_null=True,
        help_text="The caller's city as a gateway would find it: `city`, the city header, "
        "or GeoIP for `ip` (`local` for loopback and private addresses).",
    )
    revision = serializers.IntegerField()
    instances = serializers.ListField(child=serializers.DictField())
    hops = serializers.ListField(
        child=SimulateHopSerializer(), required=False, help_text="With `path`: each hop."
    )


class ServiceSerializer(serializers.Serializer):
    name = serializers.CharField()
    registry = serializers.CharField(allow_null=True)
    prod_version = serializers.CharField()
    gray_version = serializers.CharField()
    override = serializers.DictField(child=serializers.CharField())
    instances = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="How many instances are in each state, and `no_version`: how many of them "
        "have no version (they take ALL traffic only).",
    )
    lanes = serializers.DictField(
        child=serializers.CharField(), help_text="The lanes it is a member of: lane -> version."
    )
    quarantined = serializers.ListField(
        child=serializers.CharField(),
        help_text="Versions that get no traffic at all (a release of them rolled back).",
    )
    protected = serializers.BooleanField(
        help_text="A policy or lane change of it waits as a draft for another operator."
    )


class ServiceVersionsSerializer(serializers.Serializer):
    """PATCH body; validated by policy.documents.normalize_override."""

    prod_version = serializers.CharField(required=False, allow_null=True)
    gray_version = serializers.CharField(required=False, allow_null=True)
    percent = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=100,
        help_text="This service's own sticky percent of users in gray (null: the policy's); "
        "at most two decimals.",
    )
    targeted = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="false: the header, IP, city and user rules send none of it to gray.",
    )
    protected = serializers.BooleanField(required=False, help_text="Admin only.")
    freeze_override = serializers.CharField(
        required=False, help_text="Admin only: the reason to change it inside a freeze window."
    )


class LaneMatchSerializer(serializers.Serializer):
    header = HeaderRuleSerializer()
    ips = serializers.ListField(child=serializers.CharField())
    cities = serializers.ListField(child=serializers.CharField())
    users = serializers.ListField(child=serializers.CharField())
    percent = serializers.FloatField(
        min_value=0, max_value=100, help_text="At most two decimals (0.01 % steps)."
    )


class MirrorSerializer(serializers.Serializer):
    """Shadow traffic: the share of the service's prod requests copied to this version."""

    percent = serializers.FloatField(min_value=0.01, max_value=100)


class LaneMemberSerializer(serializers.Serializer):
    version = serializers.CharField()
    percent = serializers.FloatField(min_value=0, max_value=100)
    targeted = serializers.BooleanField()
    mirror = MirrorSerializer(required=False)


class LaneSerializer(serializers.Serializer):
    """A lane (contract "Lanes"); validated by routing_engine.lanes.normalize_lane. In a
    request, a member may also be its version alone."""

    name = serializers.RegexField(r"^[a-z0-9][a-z0-9-]{0,62}$")
    priority = serializers.IntegerField(min_value=0, max_value=1_000_000)
    enabled = serializers.BooleanField(default=True)
    match = LaneMatchSerializer(required=False)
    members = serializers.DictField(child=LaneMemberSerializer(), required=False)
    builtin = serializers.BooleanField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True)
    updated_by = serializers.CharField(read_only=True)


class FreezeSerializer(serializers.ModelSerializer):
    """A freeze window; `services` empty: every service."""

    services = serializers.ListField(child=serializers.CharField(), required=False)
    reason = serializers.CharField(max_length=500)

    class Meta:
        model = Freeze
        fields = ["id", "starts_at", "ends_at", "services", "reason", "created_by", "created_at"]
        read_only_fields = ["id", "created_by", "created_at"]

    def validate_services(self, value: list[str]) -> list[str]:
        names = sorted(set(value))
        known = set(Service.objects.filter(name__in=names).values_list("name", flat=True))
        unknown = [name for name in names if name not in known]
        if unknown:
            raise serializers.ValidationError(f"No service named: {', '.join(unknown)}.")
        return names

    def validate(self, attrs: dict) -> dict:
        if attrs["ends_at"] <= attrs["starts_at"]:
            raise serializers.ValidationError({"ends_at": ["Must be after starts_at."]})
        return attrs


class PolicyDraftSerializer(serializers.ModelSerializer):
    class Meta:
        model = PolicyDraft
        fields = [
            "id",
            "state",
            "author",
            "created_at",
            "source",
            "action",
            "object_label",
            "comment",
            "base_revision",
            "services",
            "decided_by",
            "decided_at",
            "reason",
        ]


class PolicyDraftDetailSerializer(PolicyDraftSerializer):
    config = serializers.JSONField(source="document", help_text="The document it proposes.")
    diff = serializers.SerializerMethodField(help_text="Against the live document now.")

    class Meta(PolicyDraftSerializer.Meta):
        fields = [*PolicyDraftSerializer.Meta.fields, "config", "diff"]

    def get_diff(self, draft: PolicyDraft) -> list[dict]:
        return diff_of(draft)


class DraftDecisionSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500)
    freeze_override = serializers.CharField(
        required=False, help_text="Admin only: approve inside a freeze window, for this reason."
    )
