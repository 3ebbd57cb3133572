#!/usr/bin/env python3
"""openapi-check.py - check HTTP answers, and the API's routes, against doc/openapi.yaml.

Usage: openapi-check.py [--status N] SPEC METHOD PATH HEADERS BODY
       openapi-check.py --routes SPEC API_C

HEADERS is the answer's status line and headers as `curl -D FILE` writes
them (the last answer's, after any 100 Continue), BODY its body. The
operation is found by METHOD and PATH matched against the path templates
(`{id}` matches one segment; a query string is ignored); with none, the
answer must be a problem (components/responses/Problem), 405 when another
method has PATH, else 404. The check fails
unless the status is declared for the operation, the Content-Type is one
of the declared media types, every header the answer declares `required`
is present, and the body (JSON) matches the media type's schema ($ref
resolved within SPEC, JSON Schema 2020-12 as OpenAPI 3.1 says).
With --status, the answer's status must also be N. PATH may be the
path template itself ("/v1/accounts/{id}/usage").

--routes checks the description itself: every schema valid JSON Schema,
every $ref found, and the route table of billingd/api.c (API_C, its
route_names) equal to the paths of SPEC: every route served is described
and every path described is served.

Prints nothing and exits 0 when it matches; else one line per problem on
stderr, exit 1. Exit 2 on bad usage or an unreadable file.
Used by tests/check-api.sh, check-api-documents.sh and check-console.sh
(python3-yaml, python3-jsonschema).
"""
import copy
import json
import re
import sys
import urllib.parse

import jsonschema
import yaml

try:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012
except ImportError:  # jsonschema before 4.18 (Debian 12): its RefResolver
    Registry = None

BASE = "urn:billing:openapi"


def absolute_refs(node):
    """Rewrite every "#/..." $ref to BASE + "#/...", in place."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node["$ref"] = BASE + ref
        for v in node.values():
            absolute_refs(v)
    elif isinstance(node, list):
        for v in node:
            absolute_refs(v)


def deref(spec, node):
    """Follow a local $ref of an OpenAPI object (response, header, parameter)."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        if ref.startswith(BASE):
            ref = ref[len(BASE):]
        if not ref.startswith("#/"):
            raise ValueError("only local $ref: " + ref)
        node = spec
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def find_operation(spec, method, path):
    path = urllib.parse.urlsplit(path).path
    for template, item in spec.get("paths", {}).items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in item:
            return template, item[method.lower()]
    return None, None


def read_headers(text):
    """The last answer of a `curl -D` file: (status, {lower name: value})."""
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.strip()]
    if not blocks:
        return None, {}
    lines = blocks[-1].splitlines()
    m = re.match(r"HTTP/\S+\s+(\d{3})", lines[0])
    if m is None:
        return None, {}
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(m.group(1)), headers


def check_routes(spec_path, api_c):
    """The description's own soundness, and its paths against api.c's routes."""
    bad = []
    with open(spec_path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    for name, s in doc.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(s)
        except jsonschema.SchemaError as e:
            bad.append("%s: schema %s: %s" % (spec_path, name, e.message))

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                try:
                    t = doc
                    for part in ref[2:].split("/"):
                        t = t[part]
                except (KeyError, TypeError):
                    bad.append("%s: $ref %s not found" % (spec_path, ref))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    with open(api_c, encoding="utf-8") as f:
        src = f.read()
    m = re.search(r"route_names\[N_ROUTES\] = \{(.*?)\};", src, re.S)
    if m is None:
        bad.append("%s: no route_names table" % api_c)
        routes = set()
    else:
        routes = set(re.findall(r'"(/[^"]*)"', m.group(1)))
    paths = set(doc.get("paths", {}))
    for r in sorted(routes - paths):
        bad.append("billingd/api.c serves %s, which %s does not describe" % (r, spec_path))
    for r in sorted(paths - routes):
        bad.append("%s describes %s, which billingd/api.c does not serve" % (spec_path, r))
    for b in bad:
        print(b, file=sys.stderr)
    return 1 if bad else 0


def main(argv):
    want_status = None
    if len(argv) == 4 and argv[1] == "--routes":
        return check_routes(argv[2], argv[3])
    if len(argv) > 2 and argv[1] == "--status":
        want_status = int(argv[2])
        argv = argv[:1] + argv[3:]
    if len(argv) != 6:
        print("\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    spec_path, method, path, headers_path, body_path = argv[1:]
    try:
        with open(spec_path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
        with open(headers_path, encoding="iso-8859-1") as f:
            status, headers = read_headers(f.read())
        with open(body_path, "rb") as f:
            body = f.read()
    except (OSError, yaml.YAMLError) as e:
        print("openapi-check: %s" % e, file=sys.stderr)
        return 2
    spec = copy.deepcopy(spec)
    absolute_refs(spec)
    if Registry is not None:
        registry = Registry().with_resource(
            BASE, Resource.from_contents(spec, default_specification=DRAFT202012))

        def validator(schema):
            return jsonschema.Draft202012Validator(schema, registry=registry)
    else:
        def validator(schema):
            return jsonschema.Draft202012Validator(
                schema, resolver=jsonschema.RefResolver(BASE, spec))
    problems = []
    where = "%s %s" % (method, path)
    template, op = find_operation(spec, method, path)
    if status is None:
        print("%s: no HTTP status line in %s" % (where, headers_path), file=sys.stderr)
        return 1
    if want_status is not None and status != want_status:
        print("%s: status %d, expected %d" % (where, status, want_status), file=sys.stderr)
        return 1
    if op is None:
        # A method the path does not have is 405, a path the API does not
        # have 404: a problem either way (components/responses/Problem).
        known = any(find_operation(spec, m, path)[1] is not None
                    for m in ("get", "put", "post", "delete", "patch"))
        want = 405 if known else 404
        if status != want:
            print("%s: no such operation in %s, and the status is %d, not %d"
                  % (where, spec_path, status, want), file=sys.stderr)
            return 1
        template = "(none)"
        op = {"responses": {str(want): {"$ref": BASE + "#/components/responses/Problem"}}}
    responses = op.get("responses", {})
    answer = responses.get(str(status)) or responses.get("%dXX" % (status // 100)) \
        or responses.get("default")
    if answer is None:
        print("%s: status %d is not declared for %s %s (declared: %s)"
              % (where, status, method, template, ", ".join(sorted(responses))),
              file=sys.stderr)
        return 1
    answer = deref(spec, answer)
    for name, h in answer.get("headers", {}).items():
        h = deref(spec, h)
        if h.get("required") and name.lower() not in headers:
            problems.append("status %d: header %s missing" % (status, name))
        elif name.lower() in headers and "schema" in h:
            try:
                validator(h["schema"]).validate(headers[name.lower()])
            except jsonschema.ValidationError as e:
                problems.append("header %s: %s" % (name, e.message))
    content = answer.get("content")
    if content:
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in content:
            problems.append("status %d: Content-Type '%s' is not declared (%s)"
                            % (status, ctype, ", ".join(content)))
        else:
            schema = content[ctype].get("schema")
            if not (ctype.endswith("/json") or ctype.endswith("+json")):
                schema = None  # a PDF or a CSV: its media type is the check
                body = b"null"
            try:
                doc = json.loads(body)
            except ValueError as e:
                problems.append("status %d: the body is not JSON: %s" % (status, e))
                schema = None
            if schema is not None:
                v = validator(schema)
                for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
                    problems.append("status %d: body%s: %s" % (
                        status, "".join("[%r]" % p for p in e.absolute_path), e.message))
    for p in problems:
        print("%s: %s" % (where, p), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
