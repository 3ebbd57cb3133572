#!/usr/bin/env python3
"""openapi-schema-check.py SPEC METHOD PATH STATUS FILE: validate the JSON answer in
FILE against the schema SPEC (an OpenAPI 3.1 file) gives operation METHOD PATH
(the path as the spec writes it, "/v1/invoices/{number}") for STATUS. Prints
nothing and exits 0 when it conforms; else prints why and exits 1.
Used by tests/check-api-documents.sh (python3-yaml, python3-jsonschema)."""
import json
import sys

import jsonschema
import yaml


def main():
    spec_path, method, path, status, answer = sys.argv[1:6]
    with open(spec_path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    op = spec["paths"][path][method.lower()]
    resp = op["responses"][status]
    if "$ref" in resp:
        resp = spec["components"]["responses"][resp["$ref"].rsplit("/", 1)[1]]
    content = resp.get("content", {})
    media = "application/problem+json" if "application/problem+json" in content \
        else "application/json"
    schema = dict(content[media]["schema"])
    schema["components"] = spec["components"]  # "#/components/..." resolves here
    with open(answer, encoding="utf-8") as f:
        doc = json.load(f)
    try:
        jsonschema.Draft202012Validator(schema).validate(doc)
    except jsonschema.ValidationError as e:
        print("%s %s %s: %s at %s" % (method, path, status, e.message, list(e.absolute_path)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
