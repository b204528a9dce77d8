from django import forms

from releases.documents import policy_of

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
    percent = forms.IntegerField(min_value=0, max_value=100, label="Percent of users")
    prod_version = forms.CharField(label="Prod version")
    gray_version = forms.CharField(label="Gray version")
    comment = forms.CharField(required=False, max_length=500, label="Comment")

    @classmethod
    def initial_from(cls, state) -> dict:
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
            "percent": data["percent"],
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


class ReleaseForm(forms.Form):
    """A new release. Steps as text ("targeted, 5, 25, 50, 100"); validation is the API's
    (rollouts.serializers), so the page and the API accept the same releases."""

    service = forms.CharField(label="Service")
    to_version = forms.CharField(label="New version (gray)")
    from_version = forms.CharField(required=False, label="From version (empty: prod)")
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
    start = forms.BooleanField(required=False, initial=True, label="Start now")

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

    def api_body(self) -> dict:
        data = self.cleaned_data
        analysis = {
            key: data[key]
            for key in (
                "interval_s",
                "min_requests",
                "max_error_rate_increase",
                "failures_tolerated",
                "max_p95_ms",
                "deadline_s",
            )
        }
        return {
            "service": data["service"],
            "to_version": data["to_version"],
            "from_version": data["from_version"] or None,
            "steps": data["steps"],
            "analysis": analysis,
        }

    def add_api_errors(self, errors: dict) -> None:
        """The API serializer's errors, on the fields they concern."""
        for field, messages in errors.items():
            if field == "analysis" and isinstance(messages, dict):
                self.add_api_errors(messages)
                continue
            if isinstance(messages, dict | list) and messages and isinstance(messages[0], dict):
                messages = [f"step {n + 1}: {m}" for n, m in enumerate(messages) if m]
            elif isinstance(messages, dict):
                messages = [f"{k}: {v}" for k, v in messages.items()]
            for message in messages if isinstance(messages, list) else [messages]:
                self.add_error(field if field in self.fields else None, str(message))
