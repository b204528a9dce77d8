from typing import Any

from django import forms
from rest_framework.settings import api_settings

from policy.documents import policy_of
from policy.models import PolicyState

# Where an error of the policy engine shows up in the form.
ENGINE_FIELD_TO_FORM = {
    "header": "header_name",
    "header.name": "header_name",
    "header.value": "header_value",
    "versions": "gray_version",
    "versions.prod": "prod_version",
    "versions.gray": "gray_version",
}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class PolicyForm(forms.Form):
    """The gray policy, one list entry per line. Validation is the engine's, so the form
    and the API accept and reject exactly the same documents."""

    revision = forms.IntegerField(widget=forms.HiddenInput)
    enabled = forms.BooleanField(required=False, label="Gray routing at the gateway")
    routing = forms.BooleanField(required=False, label="Version-aware load balancing")
    header_name = forms.CharField(required=False, label="Header name")
    header_value = forms.CharField(required=False, label="Header value")
    ips = forms.CharField(required=False, widget=forms.Textarea, label="IPs and CIDRs")
    cities = forms.CharField(required=False, widget=forms.Textarea, label="Cities")
    users = forms.CharField(required=False, widget=forms.Textarea, label="Users")
    user_header = forms.CharField(label="User header")
    city_header = forms.CharField(label="City header")
    percent = forms.DecimalField(
        min_value=0, max_value=100, decimal_places=2, label="Percent of users"
    )
    prod_version = forms.CharField(label="Prod version")
    gray_version = forms.CharField(label="Gray version")
    comment = forms.CharField(required=False, max_length=500, label="Comment")

    @classmethod
    def initial_from(cls, state: PolicyState) -> dict[str, Any]:
        return cls.fields_from_policy(policy_of(state.document), state.revision)

    @staticmethod
    def fields_from_policy(policy: dict, revision: int) -> dict:
        return {
            "revision": revision,
            "enabled": policy["enabled"],
            "routing": policy["routing"],
            "header_name": policy["header"]["name"],
            "header_value": policy["header"]["value"],
            "ips": "\n".join(policy["ips"]),
            "cities": "\n".join(policy["cities"]),
            "users": "\n".join(policy["users"]),
            "user_header": policy["user_header"],
            "city_header": policy["city_header"],
            "percent": policy["percent"],
            "prod_version": policy["versions"]["prod"],
            "gray_version": policy["versions"]["gray"],
        }

    def policy_data(self) -> dict:
        data = self.cleaned_data
        return {
            "enabled": data["enabled"],
            "routing": data["routing"],
            "header": {"name": data["header_name"], "value": data["header_value"]},
            "ips": _lines(data["ips"]),
            "cities": _lines(data["cities"]),
            "users": _lines(data["users"]),
            "user_header": data["user_header"],
            "city_header": data["city_header"],
            "percent": float(data["percent"]),
            "versions": {"prod": data["prod_version"], "gray": data["gray_version"]},
        }

    def add_engine_errors(self, errors: dict[str, list[str]]) -> None:
        for key, messages in errors.items():
            field = ENGINE_FIELD_TO_FORM.get(key, key)
            for message in messages:
                self.add_error(field if field in self.fields else None, message)


class ServiceVersionsForm(forms.Form):
    prod_version = forms.CharField(required=False, label="Prod version")
    gray_version = forms.CharField(required=False, label="Gray version")

    def changes(self) -> dict:
        # An empty box means "inherit the policy default".
        return {
            field: (self.cleaned_data[field].strip() or None)
            for field in ("prod_version", "gray_version")
        }


class SimulateForm(forms.Form):
    service = forms.CharField(required=False)
    header_name = forms.CharField(required=False, label="Header")
    header_value = forms.CharField(required=False, label="Value")
    ip = forms.GenericIPAddressField(required=False, label="Client IP")
    city = forms.CharField(required=False)
    user = forms.CharField(required=False)


NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY
ANALYSIS_FIELDS = (
    "interval_s",
    "min_requests",
    "max_error_rate_increase",
    "failures_tolerated",
    "max_p95_ms",
    "deadline_s",
)


def _api_messages(field: str, messages: object) -> list[str]:
    """A DRF error of one field as lines; an item of a list field (a step, a bundle's
    release), keyed by its index, is "<item> n: <its field>: <message>"."""
    if isinstance(messages, list) and any(isinstance(m, dict) for m in messages):
        messages = dict(enumerate(messages))
    if not isinstance(messages, dict):
        return [str(m) for m in messages] if isinstance(messages, list) else [str(messages)]
    item = {"steps": "step", "releases": "release"}.get(field, field)
    lines = []
    for key, value in messages.items():
        if isinstance(key, int):
            prefix = f"{item} {key + 1}: "
        else:
            prefix = "" if key == NON_FIELD else f"{key}: "
        lines += [prefix + line for line in _api_messages(field, value)]
    return lines


class _RolloutForm(forms.Form):
    """The steps and analysis settings a release and a bundle share. Steps as text
    ("targeted, 5, 25, 50, 100"); validation is the API's (releases.serializers), so the
    pages and the API accept the same input."""

    steps = forms.CharField(
        initial="targeted, 5, 25, 50, 100",
        label="Steps",
        help_text='"targeted" (the policy\'s lists only), then percentages of users',
    )
    interval_s = forms.IntegerField(initial=60, label="Interval (s)")
    min_requests = forms.IntegerField(initial=100, label="Minimum requests per interval")
    max_error_rate_increase = forms.FloatField(
        initial=1.0, label="Allowed error rate increase (points)"
    )
    failures_tolerated = forms.IntegerField(initial=1, label="Failed intervals tolerated")
    max_p95_ms = forms.FloatField(required=False, label="Maximum p95 (ms, optional)")
    deadline_s = forms.IntegerField(initial=3600, label="Progress deadline per step (s)")

    def clean_steps(self) -> list[dict]:
        steps: list[dict] = []
        for word in self.cleaned_data["steps"].replace(";", ",").split(","):
            word = word.strip().rstrip("%").strip()
            if not word:
                continue
            if word.lower() == "targeted":
                steps.append({"targeted": True})
            elif word.isdigit():
                steps.append({"percent": int(word)})
            else:
                raise forms.ValidationError(f"{word!r} is neither 'targeted' nor a percentage.")
        return steps

    def rollout_body(self) -> dict:
        data = self.cleaned_data
        return {"steps": data["steps"], "analysis": {key: data[key] for key in ANALYSIS_FIELDS}}

    def add_api_errors(self, errors: dict) -> None:
        """The API serializer's errors, on the fields they concern."""
        for field, messages in errors.items():
            if field == "analysis" and isinstance(messages, dict):
                self.add_api_errors(messages)
                continue
            for message in _api_messages(field, messages):
                self.add_error(field if field in self.fields else None, message)


class ReleaseForm(_RolloutForm):
    """A new release."""

    field_order = ["service", "to_version", "from_version"]

    service = forms.CharField(label="Service")
    to_version = forms.CharField(label="New version (gray)")
    from_version = forms.CharField(required=False, label="From version (empty: prod)")
    start = forms.BooleanField(required=False, initial=True, label="Start now")

    def api_body(self) -> dict:
        data = self.cleaned_data
        return {
            "service": data["service"],
            "to_version": data["to_version"],
            "from_version": data["from_version"] or None,
            **self.rollout_body(),
        }


class BundleForm(_RolloutForm):
    """A new bundle: its releases one per line, in dependency order, each with the steps
    and settings below. The fields of the bundle API's create, nothing more."""

    field_order = ["name", "releases"]
    prefix = "bundle"

    name = forms.CharField(label="Bundle name")
    releases = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "order-app V2\nuser-app V2"}),
        label="Releases, in dependency order",
        help_text="One per line: service, new version, optionally the from version (empty: "
        "prod); a service before those that call it",
    )

    def clean_releases(self) -> list[dict]:
        members: list[dict] = []
        for n, line in enumerate(self.cleaned_data["releases"].splitlines(), start=1):
            words = line.replace(",", " ").split()
            if not words:
                continue
            if len(words) not in (2, 3):
                raise forms.ValidationError(
                    f"Line {n}: {line.strip()!r} is not 'service new-version [from-version]'."
                )
            members.append(
                {
                    "service": words[0],
                    "to_version": words[1],
                    "from_version": words[2] if len(words) == 3 else None,
                }
            )
        return members

    def api_body(self) -> dict:
        data = self.cleaned_data
        return {"name": data["name"], "releases": data["releases"], **self.rollout_body()}
