"""The agent's side of sampled requests: what each engine is told to log, the lines read
back into the gateway's Sampler (capped a second), and a log replaced under the tail."""

import dataclasses
import json

from dataplane.agent.envoy_config import bootstrap
from dataplane.agent.lua_data import lua_data
from dataplane.agent.nginx_config import render_nginx
from dataplane.agent.samples import sample_log_tail, sample_of
from dataplane.gateway.sampling import Sampler
from dataplane.tests.test_agent_render import SITE, compiled

SAMPLING = dataclasses.replace(SITE, sample_rate=0.25)
DECIDED = {
    "service": "user-app",
    "method": "GET",
    "path": "/user-app/hello",
    "ip": "203.0.113.9",
    "user": "1001",
    "city": 'Zürich "1\\',
    "headers": {"x-user-no": "1001", "x-city": 'Zürich "1\\'},
}


def test_no_sample_log_unless_sampling():
    assert "samples.log" not in render_nginx(compiled(), SITE)
    assert "samples.log" not in json.dumps(bootstrap(SITE))
    assert "local SAMPLE_RATE = 0.0\n" in lua_data(compiled(), SITE, "nginx")


def test_nginx_logs_the_requests_decide_lua_sampled():
    conf = render_nginx(compiled(), SAMPLING)
    assert "    set $graylane_sample '';" in conf
    assert (
        f"access_log {SITE.directory / 'samples.log'} graylane_sample buffer=16k flush=1s "
        "if=$graylane_sample;" in conf
    )
    assert "local SAMPLE_RATE = 0.25\n" in lua_data(compiled(), SAMPLING, "nginx")


def test_envoy_logs_the_requests_whose_lua_filter_set_a_sample():
    logs = bootstrap(SAMPLING)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][
        0
    ]["typed_config"]["access_log"]
    assert len(logs) == 2
    sampled = logs[1]
    assert sampled["typed_config"]["path"] == str(SITE.directory / "samples.log")
    matcher = sampled["filter"]["metadata_filter"]["matcher"]
    assert matcher == {
        "filter": "graylane",
        "path": [{"key": "sample"}],
        "value": {"present_match": True},
    }


def nginx_line(status="200", seconds="0.004") -> bytes:
    # nginx's escape=json over decide.lua's JSON (UTF-8 bytes as they are).
    sample = json.dumps(DECIDED, ensure_ascii=False)
    escaped = json.dumps(sample, ensure_ascii=False)[1:-1]
    return (
        f'{{"sample":"{escaped}","status":"{status}","msec":"1700000000.104",'
        f'"seconds":"{seconds}"}}'
    ).encode()


def test_lines_of_either_engine_are_samples():
    assert sample_of(nginx_line()) == {
        **DECIDED,
        "status": 200,
        "ts": 1700000000.1,
        "latency_ms": 4.0,
    }
    envoy = {"sample": json.dumps(DECIDED), "status": 503, "start": "1700000000.250", "us": 1500}
    assert sample_of(json.dumps(envoy).encode()) == {
        **DECIDED,
        "status": 503,
        "ts": 1700000000.25,
        "latency_ms": 1.5,
    }
    assert sample_of(b'{"sample":"-","status":"200"}') is None
    assert sample_of(nginx_line(status="")) is None
    assert sample_of(b"garbled") is None


def test_the_tail_caps_a_second_and_follows_a_replaced_log(tmp_path):
    now = [100.0]
    sampler = Sampler(1.0, cap=3, clock=lambda: now[0])
    log = tmp_path / "samples.log"
    tail = sample_log_tail(log, sampler)
    tail.read()  # no log yet
    log.write_bytes(b"\n".join([nginx_line()] * 5) + b"\n" + nginx_line()[:9])
    tail.read()
    assert len(sampler.take()) == 3  # the cap; the half line waits
    now[0] += 1
    replaced = tmp_path / "new.log"
    # Rotated: a new file under the name, longer than where the tail was in the old one.
    replaced.write_bytes(b"".join(nginx_line(status=str(201 + i)) + b"\n" for i in range(7)))
    replaced.rename(log)
    tail.read()
    assert [sample["status"] for sample in sampler.take()] == [201, 202, 203]
