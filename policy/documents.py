"""The live document and its views: the policy as the API shows it, effective versions of
a service, and per-service overrides.

Document shape (also a revision's `config`):
    {"gray": {enabled, routing, header, ips, cities, users, user_header, city_header, percent},
     "versions": {"prod": "V1", "gray": "V2"},
     "services": {"user-app": {"prod": "V1", "gray": "V3", "percent": 25, "targeted": true}}}
     # overrides only; `percent` and `targeted` are the service's own routing (GrayMatcher),
     # an optional `mirror` {"percent"} its shadow traffic (routing_engine.mirror)
"""

from registry_sync.adapters.validation import SERVICE_NAME
from routing_engine import (
    CONTROL_CHARACTERS,
    DEFAULT_POLICY,
    SERVICE_ROUTING_FIELDS,
    PolicyError,
    has_control_characters,
    normalize_policy,
    normalize_service_routing,
)

MAX_VERSION_LENGTH = 64


def default_document() -> dict:
    return document_from_policy(normalize_policy(DEFAULT_POLICY), {})


def policy_of(document: dict) -> dict:
    """The policy fields the API and the form edit: gray rules plus default versions."""
    return {**document["gray"], "versions": document["versions"]}


def document_from_policy(policy: dict, services: dict) -> dict:
    gray = {key: value for key, value in policy.items() if key != "versions"}
    return {"gray": gray, "versions": policy["versions"], "services": services}


def effective_versions(document: dict, service: str) -> tuple[str, str]:
    override = document["services"].get(service, {})
    defaults = document["versions"]
    return override.get("prod") or defaults["prod"], override.get("gray") or defaults["gray"]


def normalize_override(document: dict, service: str, changes: dict) -> dict:
    """Apply `{"prod_version": ..., "gray_version": ..., "percent": ..., "targeted": ...,
    "mirror": ...}` (null inherits) to the service's override, validating the result;
    returns the new override (possibly empty)."""
    errors: dict[str, list[str]] = {}
    if not SERVICE_NAME.match(service):
        errors["name"] = [f"{service!r} is not a valid service name."]
    unknown = set(changes) - {"prod_version", "gray_version", *SERVICE_ROUTING_FIELDS}
    for key in sorted(unknown):
        errors[key] = ["Unknown field."]
    override = dict(document["services"].get(service, {}))
    routing = {key: changes[key] for key in SERVICE_ROUTING_FIELDS if key in changes}
    try:
        override.update(normalize_service_routing(routing))
    except PolicyError as exc:
        errors.update(exc.errors)
    for key, value in routing.items():
        if value is None:
            override.pop(key, None)
    for field, key in (("prod_version", "prod"), ("gray_version", "gray")):
        if field not in changes:
            continue
        value = changes[field]
        if value is None:
            override.pop(key, None)
        elif not isinstance(value, str) or not value.strip():
            errors[field] = ["Must be a non-empty string, or null to inherit the default."]
        elif len(value.strip()) > MAX_VERSION_LENGTH:
            errors[field] = [f"At most {MAX_VERSION_LENGTH} characters."]
        elif has_control_characters(value):
            errors[field] = [CONTROL_CHARACTERS]
        else:
            override[key] = value.strip()
    if not errors:
        prod = override.get("prod") or document["versions"]["prod"]
        gray = override.get("gray") or document["versions"]["gray"]
        # Only an edit that names a version may be refused for it: after a promotion a
        # service may be left with no gray version of its own (gray equal to prod).
        if prod == gray and ({"prod_version", "gray_version"} & set(changes)):
            errors["gray_version"] = [
                f"The gray version must differ from the prod version ({prod})."
            ]
        if prod in document.get("quarantined", {}).get(service, []):
            errors["prod_version"] = [
                f"{prod} of {service} is quarantined (a release of it was rolled back); "
                "lift the quarantine first."
            ]
    if errors:
        raise PolicyError(errors)
    return override


def with_override(document: dict, service: str, override: dict) -> dict:
    services = dict(document["services"])
    if override:
        services[service] = override
    else:
        services.pop(service, None)
    return {**document, "services": dict(sorted(services.items()))}


def _clashes(policy: dict, override: dict) -> bool:
    versions = policy["versions"]
    return (override.get("prod") or versions["prod"]) == (override.get("gray") or versions["gray"])


def check_overrides_still_valid(policy: dict, services: dict, previous: dict | None = None) -> None:
    """A new default version must not make a service's prod and gray versions equal (one
    left equal by a promotion, under `previous` policy, stays as it is)."""
    clashes = [
        name
        for name, override in services.items()
        if (override.get("prod") or policy["versions"]["prod"])
        == (override.get("gray") or policy["versions"]["gray"])
        and (previous is None or not _clashes(previous, override))
    ]
    if clashes:
        raise PolicyError(
            {
                "versions": [
                    "This would give prod and gray the same version for: "
                    + ", ".join(sorted(clashes))
                ]
            }
        )
