"""Gray-release routing shared by the dashboard, the gateway and the service SDK.

Plain Python (standard library, and geoip2 for a caller's city): policy validation, who
the caller is, the per-request gray decision and version-aware instance selection.
"""

from .balancer import (
    ROUTABLE_STATE,
    SmoothWeightedRoundRobin,
    choose_version,
    instance_key,
    instance_weight,
    is_routable,
    prepare,
    select_instances,
)
from .caller import LOCAL_CITY, CallerResolver, parse_networks
from .matcher import (
    ALL,
    FLAGS,
    GRAY,
    GRAY_STATUS_HEADER,
    PROD,
    Decision,
    GrayMatcher,
    lower_headers,
    user_bucket,
)
from .policy import (
    CONTROL_CHARACTERS,
    DEFAULT_POLICY,
    MAX_ENTRY_LENGTH,
    NON_FIELD_ERRORS,
    PolicyError,
    canonical_json,
    checksum,
    diff_documents,
    has_control_characters,
    merge_patch,
    normalize_ip,
    normalize_policy,
    rebase_policy,
)

__all__ = [
    "ALL",
    "CONTROL_CHARACTERS",
    "LOCAL_CITY",
    "DEFAULT_POLICY",
    "FLAGS",
    "GRAY",
    "GRAY_STATUS_HEADER",
    "MAX_ENTRY_LENGTH",
    "NON_FIELD_ERRORS",
    "PROD",
    "ROUTABLE_STATE",
    "CallerResolver",
    "Decision",
    "GrayMatcher",
    "PolicyError",
    "SmoothWeightedRoundRobin",
    "canonical_json",
    "checksum",
    "choose_version",
    "diff_documents",
    "has_control_characters",
    "instance_key",
    "instance_weight",
    "is_routable",
    "lower_headers",
    "merge_patch",
    "normalize_ip",
    "normalize_policy",
    "parse_networks",
    "prepare",
    "rebase_policy",
    "select_instances",
    "user_bucket",
]
