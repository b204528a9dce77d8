"""What a release may go to: a version its service has registered instances of (rows of the
registries' instances in any state, as the lane editor offers them). A release to a version
nothing runs would route its gray users to the prod fallback and never gather data."""

from registry_sync.services import known_versions


def unregistered_problem(service: str, version: str) -> str | None:
    """Why `version` of `service` cannot be released to, or None when instances run it."""
    registered = sorted(known_versions([service]).get(service, {}))
    if version in registered:
        return None
    return (
        f"No instance of {service} is registered with version {version}; registered "
        f"versions: {', '.join(registered) or 'none'}."
    )
