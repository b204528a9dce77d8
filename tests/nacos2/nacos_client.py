"""nacos-sdk-python 2.x (`v2.nacos`, gRPC naming; requirements-dev.txt), driven one JSON
command per stdin line by tests/test_nacos_grpc_client.py; one JSON answer per stdout line,
and one line per subscription callback (with the wall-clock time it ran). Usage:

    python tests/nacos2/nacos_client.py HOST:PORT USERNAME PASSWORD
"""

import asyncio
import json
import logging
import sys
import tempfile
import time

from v2.nacos import (
    BatchRegisterInstanceParam,
    ClientConfigBuilder,
    DeregisterInstanceParam,
    GRPCConfig,
    ListInstanceParam,
    ListServiceParam,
    NacosNamingService,
    RegisterInstanceParam,
    SubscribeServiceParam,
)


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def address(instance) -> str:
    return f"{instance.ip}:{instance.port}"


async def main(server: str, username: str, password: str) -> None:
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    config = (
        ClientConfigBuilder()
        .server_address(server)
        .username(username)
        .password(password)
        .log_level("ERROR")
        .log_dir(tempfile.mkdtemp())
        .cache_dir(tempfile.mkdtemp())
        .grpc_config(GRPCConfig(grpc_timeout=5000))
        .build()
    )
    naming = await NacosNamingService.create_naming_service(config)

    async def hosts_changed(instances) -> None:
        say({"event": "hosts", "at": time.time(), "hosts": sorted(map(address, instances))})

    async def register(c: dict):
        return await naming.register_instance(
            RegisterInstanceParam(
                service_name=c["service"], ip=c["ip"], port=c["port"],
                metadata=c.get("metadata") or {},
            )
        )  # fmt: skip

    async def deregister(c: dict):
        return await naming.deregister_instance(
            DeregisterInstanceParam(service_name=c["service"], ip=c["ip"], port=c["port"])
        )

    async def listed(c: dict):
        found = await naming.list_instances(
            ListInstanceParam(service_name=c["service"], subscribe=False, healthy_only=None)
        )
        return sorted(map(address, found))

    async def subscribe(c: dict):
        await naming.subscribe(
            SubscribeServiceParam(service_name=c["service"], subscribe_callback=hosts_changed)
        )

    def batch(c: dict) -> BatchRegisterInstanceParam:
        return BatchRegisterInstanceParam(
            service_name=c["service"],
            instances=[
                RegisterInstanceParam(service_name=c["service"], ip=c["ip"], port=port)
                for port in c["ports"]
            ],
        )

    async def batch_register(c: dict):
        return await naming.batch_register_instances(batch(c))

    async def batch_deregister(c: dict):
        return await naming.batch_deregister_instances(batch(c))

    async def services(c: dict):
        found = await naming.list_services(ListServiceParam())
        return {"count": found.count, "services": found.services}

    operations = {"register": register, "deregister": deregister, "list": listed,
                  "subscribe": subscribe, "batch_register": batch_register,
                  "batch_deregister": batch_deregister, "services": services}  # fmt: skip
    say({"ready": True})
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        if command["op"] == "close":
            break
        try:
            result = await operations[command["op"]](command)
            say({"op": command["op"], "ok": True, "result": result})
        except Exception as exc:
            say({"op": command["op"], "ok": False, "error": str(exc)})
    await naming.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
