"""The gateway document as the reference design's Nacos YAML (gateway-app.yaml +
common-config.yaml in one file), for Spring Cloud Gateways that bind their gray properties
from Nacos:

    gray:
      load: true                     # the reference design's gray.load (versions)
      version: {prodVersion: V1, grayVersion: V2}
      gateway:
        enabled: true
        grayHeadKey: gray
        grayHeadValue: gray-996
        grayIPList: ['127.0.0.1']
        grayCityList: [local]
        grayUserList: ['1001']
        grayUserHeader: X-User-No    # Graylane's additions to the rules
        grayCityHeader: X-City
        grayPercent: 0
      services:                      # only services whose versions differ from the defaults
        user-app: {prodVersion: V1, grayVersion: V3}
    graylane: {generation: 153, revision: 7, checksum: ...}

`prefix` nests the `gray` tree under dotted keys (the reference design's gateway reads
`kerwin.tool.gray`; docs/gateway-protocol.md).
Instances are not in it: Spring Cloud takes them from the Nacos registry itself.
"""

import yaml


def render(document: dict, prefix: str = "") -> str:
    gray = document["gray"]
    defaults = document["versions"]
    tree: dict = {
        "gray": {
            "load": gray["routing"],
            "version": {"prodVersion": defaults["prod"], "grayVersion": defaults["gray"]},
            "gateway": {
                "enabled": gray["enabled"],
                "grayHeadKey": gray["header"]["name"],
                "grayHeadValue": gray["header"]["value"],
                "grayIPList": gray["ips"],
                "grayCityList": gray["cities"],
                "grayUserList": gray["users"],
                "grayUserHeader": gray["user_header"],
                "grayCityHeader": gray["city_header"],
                "grayPercent": gray["percent"],
            },
            "services": {
                name: {"prodVersion": service["prod"], "grayVersion": service["gray"]}
                for name, service in document["services"].items()
                if (service["prod"], service["gray"]) != (defaults["prod"], defaults["gray"])
            },
        }
    }
    for key in reversed([part for part in prefix.split(".") if part]):
        tree = {key: tree}
    tree["graylane"] = {
        "generation": document["generation"],
        "revision": document["revision"],
        "checksum": document["checksum"],
    }
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=True, default_flow_style=False)


def left_out(document: dict) -> list[dict[str, str]]:
    """What of `document` the YAML cannot carry, as the skipped records of the gateway's ack
    (the gateways page shows them): lanes other than gray, and quarantines (the filter
    reads its instances from the registry, quarantined ones included)."""
    skipped = [
        {
            "record": f"lanes[{lane['name']}]",
            "reason": "a Nacos-mode gateway (the reference design's filter) carries the gray "
            "lane only; its requests are decided as if this lane did not exist",
        }
        for lane in document.get("lanes", [])
    ]
    skipped += [
        {
            "record": f"services.{name}.quarantined",
            "reason": "a Nacos-mode gateway cannot keep traffic from quarantined versions "
            f"({', '.join(entry['quarantined'])}): their instances stay in its registry",
        }
        for name, entry in document["services"].items()
        if entry.get("quarantined")
    ]
    return skipped[:50]
