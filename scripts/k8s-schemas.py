#!/usr/bin/env python3
"""k8s-schemas.py SWAGGER OUTDIR — turn Kubernetes' OpenAPI v2 spec (the
api/openapi-spec/swagger.json of the k8s.io/kubernetes Go module, fetched
through the Go module proxy by make chart-check) into kubeconform's
standalone strict JSON schemas: one file per kind, named as kubeconform looks
them up ({kind}-{group}-{version}.json, {kind}-{version}.json for the core
group), every $ref inlined, every object with properties closed
(additionalProperties: false, as -strict expects), int-or-string and
quantity accepting both strings and numbers (as openapi2jsonschema does)."""
import json, os, sys

spec = json.load(open(sys.argv[1]))
out = sys.argv[2]
defs = spec["definitions"]
os.makedirs(out, exist_ok=True)

def fix(node, path=()):
    if isinstance(node, list):
        return [fix(x, path) for x in node]
    if not isinstance(node, dict):
        return node
    if isinstance(node.get("$ref"), str):
        name = node["$ref"].split("/")[-1]
        if name in path:  # a recursive type (JSONSchemaProps): left open
            return {}
        return fix(defs[name], path + (name,))
    n = {k: fix(v, path) for k, v in node.items() if k not in ("x-kubernetes-group-version-kind",)}
    fmt = n.get("format")
    if fmt == "int-or-string":
        n.pop("type", None); n.pop("format", None)
        n["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    if "properties" in n and "additionalProperties" not in n:
        n["additionalProperties"] = False
    return n

quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"
if quantity in defs:
    defs[quantity] = {"oneOf": [{"type": "string"}, {"type": "number"}]}
n = 0
for name, d in defs.items():
    for gvk in d.get("x-kubernetes-group-version-kind", []):
        group = gvk["group"].split(".")[0]
        fname = gvk["kind"].lower() + (("-" + group) if group else "") + "-" + gvk["version"] + ".json"
        s = fix(d)
        s["$schema"] = "http://json-schema.org/schema#"
        json.dump(s, open(os.path.join(out, fname), "w"))
        n += 1
print(f"k8s-schemas.py: {n} schemas into {out}", file=sys.stderr)
