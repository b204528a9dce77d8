import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from django import forms
from django.forms import formset_factory
from rest_framework.serializers import BaseSerializer
from rest_framework.settings import api_settings

from policy.documents import policy_of
from policy.models import PolicyState
from policy.serializers import MAX_PATH
from routing_engine.lanes import MATCH_FIELDS
from routing_engine.records import service_name_problem

from .pickers import ALL_VERSIONS_LIST, SERVICE_LIST, Pickers

# A step's percentage as the page takes it ("5", "0.5"); the API's rules judge its value.
NUMBER = re.compile(r"\d+(\.\d*)?")


# Inputs offering the known services and versions (dashboard/pickers.py); a list of several
# services, comma-separated, offers the next one (static/js/pickers.js).
SERVICE_INPUT = forms.TextInput(attrs={"list": SERVICE_LIST})
VERSION_INPUT = forms.TextInput(attrs={"list": ALL_VERSIONS_LIST})
SERVICES_INPUT = forms.TextInput(attrs={"list": SERVICE_LIST, "data-services-list": ""})


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class PercentField(forms.FloatField):
    """A share of users: 0 to 100 in steps of 0.01 % (one bucket of users,
    docs/gateway-protocol.md). The engine refuses a third decimal with its own message, as the
    API does."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=100, **kwargs)

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {**super().widget_attrs(widget), "step": "0.01"}


# Where the city rule's city comes from: a header anyone may send is believed only from the
# proxies the operator trusts, or every caller could pick their own gray city.
CITY_HEADER_TRUST = (
    "Believed only from a trusted proxy (TRUSTED_PROXIES, on the gateways and here); from "
    "anyone else the caller's city is its address's: local for loopback and private "
    "addresses, else GeoIP's"
)


class CheckedElsewhere(forms.Form):
    """A form with checks of its own and an outside checker's (the API's serializers, the
    engine). The checker judges what passed the form's own checks even when the rest did
    not, so that a submission's every error shows at once, each on its field; its word on
    a field the form refused is left out (it is about the value not sent, and the form's
    own message says more)."""

    def submitted(self) -> dict[str, Any]:
        """The fields that passed the form's own checks: every one, or some."""
        self.is_valid()
        return self.cleaned_data

    def add_checker_errors(self, errors: Iterable[tuple[str | None, str]]) -> None:
        """The checker's (field, message) pairs on the form; a field it has not, on the
        form as a whole."""
        refused = set(self.errors)
        for field, message in errors:
            if field not in refused:
                self.add_error(field if field in self.fields else None, message)


class PublishForm(CheckedElsewhere):
    """What every editor of the live document has (dashboard/editing.py): the revision the
    page was loaded at, sent as If-Match when publishing, and the revision's comment.
    Validation is the engine's, so the forms and the API accept and reject the same input;
    `ENGINE_FIELDS` says on which field an error the engine names shows up."""

    ENGINE_FIELDS: ClassVar[dict[str, str]] = {}

    revision = forms.IntegerField(widget=forms.HiddenInput)
    comment = forms.CharField(required=False, max_length=500, label="Comment")

    @classmethod
    def post_data(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        """What a browser posts for a form showing `fields` (an unchecked box is left out)."""
        return {key: value for key, value in fields.items() if value is not False}

    def add_engine_errors(self, errors: Mapping[str, list[str]]) -> None:
        self.add_checker_errors(
            (self.ENGINE_FIELDS.get(key, key), message)
            for key, messages in errors.items()
            for message in messages
        )


class RulesForm(PublishForm):
    """The match rules the gray policy and every lane have, one list entry per line."""

    ENGINE_FIELDS = {"header": "header_name", "header.name": "header_name",
                     "header.value": "header_value"}  # fmt: skip

    header_name = forms.CharField(required=False, label="Header name")
    header_value = forms.CharField(required=False, label="Header value")
    ips = forms.CharField(required=False, widget=forms.Textarea, label="IPs and CIDRs")
    cities = forms.CharField(required=False, widget=forms.Textarea, label="Cities")
    users = forms.CharField(required=False, widget=forms.Textarea, label="Users")
    percent = PercentField(label="Percent of users")

    @staticmethod
    def rule_fields(rules: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "header_name": rules["header"]["name"],
            "header_value": rules["header"]["value"],
            "ips": "\n".join(rules["ips"]),
            "cities": "\n".join(rules["cities"]),
            "users": "\n".join(rules["users"]),
            "percent": rules["percent"],
        }

    def rules_data(self) -> dict[str, Any]:
        data = self.submitted()
        return {
            "header": {"name": data.get("header_name"), "value": data.get("header_value")},
            "ips": _lines(data.get("ips", "")),
            "cities": _lines(data.get("cities", "")),
            "users": _lines(data.get("users", "")),
            "percent": data.get("percent"),
        }


class PolicyForm(RulesForm):
    """The gray policy."""

    ENGINE_FIELDS = {
        **RulesForm.ENGINE_FIELDS,
        "versions": "gray_version",
        "versions.prod": "prod_version",
        "versions.gray": "gray_version",
    }

    enabled = forms.BooleanField(required=False, label="Gray routing at the gateway")
    routing = forms.BooleanField(required=False, label="Version-aware load balancing")
    user_header = forms.CharField(label="User header")
    city_header = forms.CharField(label="City header", help_text=CITY_HEADER_TRUST)
    prod_version = forms.CharField(label="Prod version", widget=VERSION_INPUT)
    gray_version = forms.CharField(label="Gray version", widget=VERSION_INPUT)

    @classmethod
    def initial_from(cls, state: PolicyState) -> dict[str, Any]:
        return cls.fields_from_policy(policy_of(state.document), state.revision)

    @classmethod
    def fields_from_policy(cls, policy: dict, revision: int) -> dict:
        return {
            "revision": revision,
            "enabled": policy["enabled"],
            "routing": policy["routing"],
            **cls.rule_fields(policy),
            "user_header": policy["user_header"],
            "city_header": policy["city_header"],
            "prod_version": policy["versions"]["prod"],
            "gray_version": policy["versions"]["gray"],
        }

    def policy_data(self) -> dict:
        data = self.submitted()
        return {
            "enabled": data.get("enabled"),
            "routing": data.get("routing"),
            **self.rules_data(),
            "user_header": data.get("user_header"),
            "city_header": data.get("city_header"),
            "versions": {"prod": data.get("prod_version"), "gray": data.get("gray_version")},
        }


class ServiceVersionsForm(forms.Form):
    prod_version = forms.CharField(required=False, label="Prod version", widget=VERSION_INPUT)
    gray_version = forms.CharField(required=False, label="Gray version", widget=VERSION_INPUT)

    def changes(self) -> dict:
        # An empty box means "inherit the policy default".
        return {
            field: (self.cleaned_data[field].strip() or None)
            for field in ("prod_version", "gray_version")
        }


class SimulateForm(forms.Form):
    path = forms.CharField(
        required=False,
        label="Service path",
        help_text="The service a request enters at, and those it then calls in turn, "
        "e.g. user-app, order-app",
    )
    header_name = forms.CharField(required=False, label="Header")
    header_value = forms.CharField(required=False, label="Value")
    ip = forms.GenericIPAddressField(required=False, label="Client IP")
    city = forms.CharField(
        required=False,
        help_text="As a trusted proxy's city header says it (gateways believe no one else's); "
        "empty: the client IP's city",
    )
    user = forms.CharField(required=False)

    def clean_path(self) -> list[str]:
        # Names as the registries gave them: one stored before names were checked (a "/" in
        # it, say) is still simulated, as the API does.
        path = [name.strip() for name in self.cleaned_data["path"].split(",") if name.strip()]
        if len(path) > MAX_PATH:
            raise forms.ValidationError(f"At most {MAX_PATH} services.")
        return path


class MemberForm(forms.Form):
    """One member of a lane: a service and its version in the lane. A row left empty is no
    member; percent and targeted as in the API (docs/api.md, "Lanes")."""

    service = forms.CharField(required=False, label="Service", widget=SERVICE_INPUT)
    version = forms.CharField(required=False, label="Version", widget=VERSION_INPUT)
    percent = PercentField(
        required=False,
        initial=0,
        label="Percent entering here",
        help_text="Users entering at this service put in the lane besides its rules",
    )
    targeted = forms.BooleanField(
        required=False,
        initial=True,
        label="The lane's rules apply here",
        help_text="Off: requests entering at this service join by the percent only",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        service, version = data.get("service", ""), data.get("version", "")
        if service and not version:
            self.add_error("version", "Choose the version of this service in the lane.")
        elif version and not service:
            self.add_error("service", "Choose the service this version is of.")
        if service and (problem := service_name_problem(service)):
            self.add_error("service", f"{problem}.")
        return data


class BaseMemberFormSet(forms.BaseFormSet):
    def add_fields(self, form: forms.Form, index: int | None) -> None:
        super().add_fields(form, index)
        if "DELETE" in form.fields:
            form.fields["DELETE"].label = "Remove from the lane"

    def clean(self) -> None:
        seen: set[str] = set()
        for row in self.forms:
            service = row.cleaned_data.get("service")
            if not service or row.cleaned_data.get("DELETE"):
                continue
            if service in seen:
                row.add_error("service", f"{service} is listed twice.")
            seen.add(service)


# Three empty rows for new members under the lane's own: a preview adds three more.
MemberFormSet = formset_factory(MemberForm, formset=BaseMemberFormSet, extra=3, can_delete=True)


class LaneForm(RulesForm):
    """A lane other than gray, with its members as rows (`members`, a formset). What the
    engine says of the lane shows up on the field, or the member row, it is about."""

    ENGINE_FIELDS = {f"match.{key}": field for key, field in RulesForm.ENGINE_FIELDS.items()}
    ENGINE_FIELDS |= {f"match.{key}": key for key in MATCH_FIELDS if key != "header"}

    priority = forms.IntegerField(
        label="Priority",
        help_text="Lanes are tried in ascending priority, then name: the first whose rules "
        "match takes the request",
    )
    enabled = forms.BooleanField(
        required=False, label="Enabled", help_text="Off: the lane is not tried"
    )

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        initial: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(data, initial=initial)
        members = (initial or {}).get("members") if data is None else None
        self.members = MemberFormSet(data, initial=members, prefix="members")

    @classmethod
    def fields_from_lane(cls, lane: Mapping[str, Any], revision: int) -> dict[str, Any]:
        """The form's fields showing `lane` (the engine's form of it); `members` a list."""
        return {
            "revision": revision,
            "priority": lane["priority"],
            "enabled": lane["enabled"],
            **cls.rule_fields(lane["match"]),
            "members": [{"service": service, **member}
                        for service, member in lane["members"].items()],
        }  # fmt: skip

    @classmethod
    def post_data(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        members = fields.get("members", [])
        data = super().post_data({k: v for k, v in fields.items() if k != "members"})
        blank = {"service": "", "version": "", "percent": 0, "targeted": True}
        rows = [*members, *[blank] * MemberFormSet.extra]
        for index, row in enumerate(rows):
            for key, value in super().post_data(row).items():
                data[f"members-{index}-{key}"] = value
        data |= {"members-TOTAL_FORMS": len(rows), "members-INITIAL_FORMS": len(members)}
        return data

    def is_valid(self) -> bool:
        members_valid = self.members.is_valid()
        return super().is_valid() and members_valid

    def use_pickers(self, offered: Pickers) -> None:
        """Each member row's version offers the versions of the row's service."""
        for row in self.members:
            offered.pair(row["service"], row["version"])

    def members_data(self) -> dict[str, dict[str, Any]]:
        members = {}
        for row in self.members:
            data = row.cleaned_data
            if data.get("service") and not data.get("DELETE"):
                members[data["service"]] = {
                    "version": data.get("version"),
                    "percent": data.get("percent") or 0,
                    "targeted": data.get("targeted", True),
                }
        return members

    def lane_data(self) -> dict[str, Any]:
        """The lane as the API takes it (its name apart)."""
        data = self.submitted()
        return {
            "priority": data.get("priority"),
            "enabled": data.get("enabled"),
            "match": self.rules_data(),
            "members": self.members_data(),
        }

    def add_engine_errors(self, errors: Mapping[str, list[str]]) -> None:
        rows = {row.cleaned_data.get("service"): row for row in self.members}
        refused = {id(row): set(row.errors) for row in self.members}
        others = {}
        for key, messages in errors.items():
            # "members.<service>.<field>"; a service name may hold dots, a field does not.
            service, _, field = key.removeprefix("members.").rpartition(".")
            row = rows.get(service) if key.startswith("members.") else None
            if row is None or field not in row.fields:
                others[key] = messages
                continue
            if field not in refused[id(row)]:
                for message in messages:
                    row.add_error(field, message)
        super().add_engine_errors(others)


class NewLaneForm(LaneForm):
    name = forms.CharField(
        label="Name", help_text="1-63 lower-case letters, digits and '-', e.g. feature-x"
    )

    field_order = ["name"]


class GrayLanePlaceForm(PublishForm):
    """The gray lane's place among the lanes; its rules are the policy's and its members the
    services' gray versions, edited where those are."""

    priority = forms.IntegerField(
        label="Priority",
        help_text="Lanes are tried in ascending priority, then name: the first whose rules "
        "match takes the request",
    )

    @classmethod
    def fields_from_place(cls, place: Mapping[str, Any], revision: int) -> dict[str, Any]:
        return {"revision": revision, "priority": place["priority"]}


NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY
ANALYSIS_FIELDS = (
    "interval_s",
    "min_requests",
    "max_error_rate_increase",
    "failures_tolerated",
    "max_p95_ms",
    "deadline_s",
    "max_p95_increase_ms",
)


def _api_messages(field: str, messages: object) -> list[str]:
    """A DRF error of one field as lines; an item of a list field (a step, a bundle's
    release), keyed by its index, is "<item> n: <its field>: <message>"."""
    if isinstance(messages, list) and any(isinstance(m, dict) for m in messages):
        messages = dict(enumerate(messages))
    if not isinstance(messages, dict):
        return [str(m) for m in messages] if isinstance(messages, list) else [str(messages)]
    item = {"steps": "step", "releases": "release", "metrics": "metric"}.get(field, field)
    lines = []
    for key, value in messages.items():
        if isinstance(key, int):
            prefix = f"{item} {key + 1}: "
        else:
            prefix = "" if key == NON_FIELD else f"{key}: "
        lines += [prefix + line for line in _api_messages(field, value)]
    return lines


def _number(text: str) -> float | str:
    """A bound as the API takes it: a number, or the text as typed for the API to refuse."""
    try:
        return float(text)
    except ValueError:
        return text


class _ApiCheckedForm(CheckedElsewhere):
    """A form whose rules are an API serializer's: its errors land on the fields they
    concern, those of a nested serializer (`nested_errors`) on the form's own fields, and
    those of a field the API names otherwise (`api_names`) on the form's field."""

    nested_errors: tuple[str, ...] = ()
    api_names: ClassVar[dict[str, str]] = {}

    def api_body(self) -> dict:
        """What the API would take: the fields that passed the form's own checks."""
        raise NotImplementedError

    def api_check(self, *serializers: BaseSerializer) -> bool:
        """Whether the form's own checks and every serializer's pass (each made from what
        `submitted` holds), every error of them all on the form."""
        for serializer in serializers:
            if not serializer.is_valid():
                self.add_api_errors(dict(serializer.errors))
        return not self.errors

    def add_api_errors(self, errors: Mapping[str, Any]) -> None:
        self.add_checker_errors(self._api_lines(errors))

    def _api_lines(self, errors: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        for field, messages in errors.items():
            if field in self.nested_errors and isinstance(messages, dict):
                yield from self._api_lines(messages)
                continue
            for message in _api_messages(field, messages):
                yield self.api_names.get(field, field), message


class _RolloutForm(_ApiCheckedForm):
    """The steps and analysis settings a release and a bundle share. Steps as text
    ("targeted, 5, 25, 50, 100"); validation is the API's (releases.serializers), so the
    pages and the API accept the same input."""

    steps = forms.CharField(
        initial="targeted, 5, 25, 50, 100",
        label="Steps",
        help_text='"targeted" (the lane\'s rules only), then percentages of users (0.01 to 100); '
        '"approval" waits for an operator',
    )
    interval_s = forms.IntegerField(initial=60, label="Interval (s)")
    min_requests = forms.IntegerField(initial=100, label="Minimum requests per interval")
    max_error_rate_increase = forms.FloatField(
        initial=1.0, label="Allowed error rate increase (points)"
    )
    failures_tolerated = forms.IntegerField(initial=1, label="Failed intervals tolerated")
    max_p95_ms = forms.FloatField(required=False, label="Maximum p95 (ms, optional)")
    max_p95_increase_ms = forms.FloatField(
        required=False,
        label="Maximum p95 increase over prod (ms, optional)",
        help_text="An interval whose gray p95 is more than this above prod's fails",
    )
    metrics = forms.CharField(
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 2,
                "placeholder": 'queue_depth | max(queue_depth{service="{service}", '
                'version="{version}"}) | above | 100',
            }
        ),
        label="Custom metrics (optional)",
        help_text="One per line: name | PromQL query ({service}, {version}, {lane} filled in) | "
        "above or below | bound. The gray version's value past the bound fails the interval",
    )
    deadline_s = forms.IntegerField(initial=3600, label="Progress deadline per step (s)")

    def clean_steps(self) -> list[dict]:
        steps: list[dict] = []
        for word in self.cleaned_data["steps"].replace(";", ",").split(","):
            word = word.strip().rstrip("%").strip()
            if not word:
                continue
            if word.lower() == "targeted":
                steps.append({"targeted": True})
            elif word.lower() == "approval":
                steps.append({"approval": True})
            elif NUMBER.fullmatch(word):
                steps.append({"percent": float(word) if "." in word else int(word)})
            else:
                raise forms.ValidationError(
                    f"{word!r} is neither 'targeted', 'approval' nor a percentage."
                )
        return steps

    def clean_metrics(self) -> list[dict]:
        metrics: list[dict] = []
        for n, line in enumerate(self.cleaned_data["metrics"].splitlines(), start=1):
            if not line.strip():
                continue
            # The query may hold "|" itself (a regex matcher): the name is before the first,
            # the side and the bound after the last two.
            name, _, rest = line.partition("|")
            parts = [part.strip() for part in rest.rsplit("|", 2)]
            if len(parts) != 3:
                raise forms.ValidationError(
                    f"Line {n}: {line.strip()!r} is not 'name | query | above or below | bound'."
                )
            query, fail_when, bound = parts
            metrics.append(
                {
                    "name": name.strip(),
                    "query": query,
                    "fail_when": fail_when,
                    "bound": _number(bound),
                }
            )
        return metrics

    nested_errors = ("analysis",)

    def rollout_body(self) -> dict:
        data = self.submitted()
        analysis = {key: data.get(key) for key in ANALYSIS_FIELDS}
        return {
            "steps": data.get("steps"),
            "analysis": {**analysis, "metrics": data.get("metrics")},
        }


class ReleaseForm(_RolloutForm):
    """A new release."""

    field_order = ["service", "to_version", "from_version", "lane"]

    service = forms.CharField(label="Service", widget=SERVICE_INPUT)
    to_version = forms.CharField(label="New version (gray)", widget=VERSION_INPUT)
    from_version = forms.CharField(
        required=False, label="From version (empty: prod)", widget=VERSION_INPUT
    )
    lane = forms.CharField(required=False, initial="gray", label="Lane (empty: gray)")
    # Checked by the API (above 0, up to 100, two decimals), whose message it shows.
    mirror = forms.FloatField(
        required=False,
        label="Shadow traffic: % of prod mirrored (empty: none)",
        help_text="Prod GET, HEAD and OPTIONS requests copied to the new version and compared",
    )
    start = forms.BooleanField(required=False, initial=True, label="Start now")
    start_at = forms.DateTimeField(
        required=False,
        # The browser's datetime-local input; read in TIME_ZONE, UTC.
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        label="Start at (UTC, optional)",
        help_text="Set: the release is scheduled and starts then instead of now",
    )

    # The start time is checked by the API's `start` (ReleaseStartSerializer), as `at`.
    api_names = {"at": "start_at"}

    def api_body(self) -> dict:
        data = self.submitted()
        mirror = data.get("mirror")
        return {
            "service": data.get("service"),
            "to_version": data.get("to_version"),
            "from_version": data.get("from_version") or None,
            **({"lane": data["lane"]} if data.get("lane") else {}),
            **({"mirror": {"percent": mirror}} if mirror is not None else {}),
            **self.rollout_body(),
        }


class BundleForm(_RolloutForm):
    """A new bundle: its releases one per line, each with the steps and settings below,
    and after `calls` the services of the bundle it calls (its `depends_on`). The fields of
    the bundle API's create, nothing more."""

    field_order = ["name", "releases"]
    prefix = "bundle"

    name = forms.CharField(label="Bundle name")
    releases = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "order-app V2\nuser-app V2"}),
        label="Releases",
        help_text="One per line: service, new version, optionally the from version (empty: "
        "prod), optionally `calls` and the services of the bundle it calls (released before "
        "it); without any `calls`, released in the listed order",
    )

    def clean_releases(self) -> list[dict]:
        members: list[dict] = []
        for n, line in enumerate(self.cleaned_data["releases"].splitlines(), start=1):
            words = line.replace(",", " ").split()
            if not words:
                continue
            calls = words.index("calls") if "calls" in words else len(words)
            words, depends_on = words[:calls], words[calls + 1 :]
            if len(words) not in (2, 3):
                raise forms.ValidationError(
                    f"Line {n}: {line.strip()!r} is not 'service new-version [from-version] "
                    "[calls service ...]'."
                )
            members.append(
                {
                    "service": words[0],
                    "to_version": words[1],
                    "from_version": words[2] if len(words) == 3 else None,
                    "depends_on": depends_on,
                }
            )
        return members

    def api_body(self) -> dict:
        data = self.submitted()
        return {
            "name": data.get("name"),
            "releases": data.get("releases"),
            **self.rollout_body(),
        }


class FreezeForm(_ApiCheckedForm):
    """A new freeze window, as the releases page takes it. Every rule is the API's
    (policy.serializers.FreezeSerializer), so the page and the API accept the same windows;
    times are UTC, as the page shows them."""

    starts_at = forms.CharField(
        required=False,
        label="Starts (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    ends_at = forms.CharField(
        required=False,
        label="Ends (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    services = forms.CharField(
        required=False,
        label="Services (comma-separated; empty: all)",
        widget=SERVICES_INPUT,
    )
    reason = forms.CharField(required=False, label="Reason")

    def api_body(self) -> dict:
        """What `POST /api/v1/freezes/` would take; a field left empty is not sent."""
        data = self.submitted()
        body = {key: data[key] for key in ("starts_at", "ends_at", "reason") if data.get(key)}
        services = data.get("services", "")
        body["services"] = [name.strip() for name in services.split(",") if name.strip()]
        return body
