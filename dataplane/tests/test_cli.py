"""The command lines of the gateway and the agent: the options they share have the same names
and environment variables, the command line wins over the environment, bad values stop it."""

import pytest

from dataplane.agent import options as agent_options
from dataplane.gateway import options as gateway_options

REQUIRED = {"GATEWAY_DASHBOARD": "http://127.0.0.1:8000/", "GATEWAY_TOKEN": "t0k3n"}


def test_the_environment_stands_in_for_flags_and_the_command_line_wins():
    environ = {**REQUIRED, "GATEWAY_LISTEN": "127.0.0.1:9100", "GATEWAY_POLL_WAIT": "90"}
    options = gateway_options.parse([], environ=environ)
    assert (options.dashboards, options.token) == (("http://127.0.0.1:8000",), "t0k3n")
    assert (options.host, options.port) == ("127.0.0.1", 9100)
    assert options.poll_wait == 60.0  # the long poll's most
    assert options.cache_file.name == "gateway-9100.json"
    options = gateway_options.parse(["--listen", "[::1]:9200", "--prod-fallback", "no"], environ)
    assert (options.host, options.port, options.prod_fallback) == ("::1", 9200, False)


def test_several_dashboards_come_comma_separated_in_their_order():
    argv = ["--dashboard", "http://10.0.0.2:8000/, http://10.0.0.1:8000"]
    for parse in (
        gateway_options.parse,
        lambda a, e: agent_options.parse(["--engine", "envoy", *a], e),
    ):
        options = parse(argv, REQUIRED)
        assert options.dashboards == ("http://10.0.0.2:8000", "http://10.0.0.1:8000")
    environ = {**REQUIRED, "GATEWAY_DASHBOARD": "http://a:1,http://b:2"}
    assert gateway_options.parse([], environ).dashboards == ("http://a:1", "http://b:2")


def test_the_agent_takes_the_gateways_shared_options_by_the_same_names():
    argv = ["--engine", "nginx", "--trusted-proxies", "10.0.0.0/8", "--name", "edge-1"]
    environ = {**REQUIRED, "GATEWAY_METRICS_INTERVAL": "2", "AGENT_WORKDIR": "/tmp/agent-x"}
    options = agent_options.parse(argv, environ=environ)
    assert (options.engine, options.name, options.trusted_proxies) == (
        "nginx",
        "edge-1",
        "10.0.0.0/8",
    )
    assert options.metrics_interval == 2.0 and options.admin_port == 0
    assert (options.samples, options.sample_rate, options.sample_cap) == (True, 0.1, 200)
    environ = {**environ, "GATEWAY_SAMPLES": "false", "GATEWAY_SAMPLE_RATE": "0.5"}
    options = agent_options.parse([*argv, "--sample-cap", "7"], environ=environ)
    assert (options.samples, options.sample_rate, options.sample_cap) == (False, 0.5, 7)


@pytest.mark.parametrize(
    "argv",
    [
        ["--listen", "8080"],
        ["--listen", "host:99999"],
        ["--trusted-proxies", "10.0.0.0/8,not-a-network"],
        ["--poll-wait", "0"],
        ["--prod-fallback", "maybe"],
        ["--dashboard", ","],
        ["--dashboard", "http://a:1,10.0.0.1:8000"],
    ],
)
def test_bad_values_stop_it_with_a_message(argv, capsys):
    with pytest.raises(SystemExit):
        gateway_options.parse(argv, environ=REQUIRED)
    assert "error:" in capsys.readouterr().err
