#!/usr/bin/env python3
"""An example exec plugin for `genplane ccm-e2e` (protocol ccm-e2e.genplane.io/v1).

Its "cloud" is a JSON file, {"instances": ["node-1", ...]}, named by the provider config
(`--provider-config` with {"stateFile": "/path/cloud.json"}). It can delete instances and
nothing else. A real provider calls its cloud's API where this edits the file.
"""
import json
import sys

API_VERSION = "ccm-e2e.genplane.io/v1"


def answer(result=None, error=None, unsupported=False):
    reply = {"apiVersion": API_VERSION, "result": result}
    if error is not None:
        reply = {"apiVersion": API_VERSION, "error": {"message": error, "unsupported": unsupported}}
    json.dump(reply, sys.stdout)


request = json.load(sys.stdin)
state_file = (request.get("config") or {}).get("stateFile", "cloud.json")
operation = request["operation"]
if operation == "capabilities":
    answer({"capabilities": ["NodeDeletion"]})
elif operation == "deleteInstance":
    with open(state_file) as f:
        cloud = json.load(f)
    name = request["node"]["name"]
    if name not in cloud["instances"]:
        answer(error=f"no instance {name}")
    else:
        cloud["instances"].remove(name)
        with open(state_file, "w") as f:
            json.dump(cloud, f)
        answer()
else:
    answer(error=f"{operation} is not supported", unsupported=True)
