"""The Python `kubernetes` client against genplane: CoreV1Api CRUD, selectors, and a watch.

Usage: python_client.py KUBECONFIG. Prints "python client ok" and exits 0 when every check holds.
"""
import sys
import threading

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(sys.argv[1])
v1 = client.CoreV1Api()
ns = "default"


def configmap(name, app, data):
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"app": app}), data=data)


# Create (the client sends the body without a Content-Type), read, replace, patch, list, delete.
created = v1.create_namespaced_config_map(ns, configmap("py-a", "py", {"k": "v1"}))
assert created.metadata.uid, created
assert v1.read_namespaced_config_map("py-a", ns).data == {"k": "v1"}
current = v1.read_namespaced_config_map("py-a", ns)
current.data["k"] = "v2"
assert v1.replace_namespaced_config_map("py-a", ns, current).data["k"] == "v2"
# A list body is sent as a JSON patch.
patched = v1.patch_namespaced_config_map("py-a", ns, [{"op": "replace", "path": "/data/k", "value": "v3"}])
assert patched.data["k"] == "v3", patched.data
v1.create_namespaced_config_map(ns, configmap("py-b", "other", {"k": "x"}))
selected = v1.list_namespaced_config_map(ns, label_selector="app=py")
assert [cm.metadata.name for cm in selected.items] == ["py-a"], selected.items
by_field = v1.list_config_map_for_all_namespaces(field_selector="metadata.name=py-b")
assert [cm.metadata.name for cm in by_field.items] == ["py-b"]
try:
    v1.read_namespaced_config_map("nope", ns)
    raise AssertionError("expected a 404")
except ApiException as e:
    assert e.status == 404 and "NotFound" in e.body, (e.status, e.body)

# Watch from the list's resourceVersion: the next matching change arrives.
rv = selected.metadata.resource_version
threading.Timer(0.5, lambda: v1.create_namespaced_config_map(ns, configmap("py-c", "py", {}))).start()
w = watch.Watch()
seen = []
for event in w.stream(v1.list_namespaced_config_map, ns, label_selector="app=py", resource_version=rv, timeout_seconds=15):
    seen.append((event["type"], event["object"].metadata.name))
    w.stop()
assert seen == [("ADDED", "py-c")], seen

for name in ["py-a", "py-b", "py-c"]:
    v1.delete_namespaced_config_map(name, ns)
assert v1.list_namespaced_config_map(ns, label_selector="app in (py,other)").items == []
print("python client ok")
