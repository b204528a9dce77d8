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
