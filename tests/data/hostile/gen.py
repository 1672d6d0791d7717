#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the bad-input corpus of tests/integration/hostile_test.sh into DIR.

Huge objects are generated here rather than committed. Each case is a pair:
NAME.json (a manifest for kubectl, or an AdmissionReview body for the
webhook) and NAME.expect, one line "CHANNEL WANT PATTERN":

  CHANNEL  kubectl | webhook
  WANT     reject (kubectl must fail) | deny (HTTP 200, allowed false) |
           http-NNN (that HTTP status) | handled (any well-formed answer)
  PATTERN  an extended regular expression the error or the denial message
           must match: it names the object and the field.

usage: gen.py DIR   (the base Rack is tests/data/webhook/review-rack-create.json)
"""
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BASE_REVIEW = os.path.join(HERE, "..", "webhook", "review-rack-create.json")


def write(out, name, doc, channel, want, pattern, raw=None):
    with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
        if raw is not None:
            f.write(raw)
        else:
            json.dump(doc, f, separators=(",", ":"))
    with open(os.path.join(out, name + ".expect"), "w", encoding="utf-8") as f:
        f.write(f"{channel} {want} {pattern}\n")


def nest(depth, leaf):
    v = leaf
    for _ in range(depth):
        v = {"a": v}
    return v


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    with open(BASE_REVIEW, encoding="utf-8") as f:
        review = json.load(f)
    rack = review["request"]["object"]
    rack["metadata"]["name"] = "hostile-r01"
    for i, t in enumerate(rack["spec"]["computeTrays"]):
        t["node"] = "hostile-r01-t%02d" % (i + 1)

    def kube(name, mutate, pattern, rname=None):
        r = copy.deepcopy(rack)
        r["metadata"]["name"] = rname or name
        mutate(r)
        write(out, name, r, "kubectl", "reject", pattern)

    def hook(name, mutate, want, pattern, rname=None):
        rv = copy.deepcopy(review)
        r = rv["request"]["object"]
        r["metadata"]["name"] = rname or name
        rv["request"]["name"] = rname or name
        mutate(rv, r)
        write(out, name, rv, "webhook", want, pattern)

    mib = "x" * (1 << 20)

    # Through the API with kubectl: the CRD schema answers, naming the field.
    kube("k-huge-serial", lambda r: r["spec"].__setitem__("chassisSerial", mib),
         r'k-huge-serial.*spec\.chassisSerial')
    kube("k-huge-name", lambda r: None, r'metadata\.name|must be no more than 253', "r" * 300)
    kube("k-trays-string", lambda r: r["spec"].__setitem__("computeTrays", "eighteen"),
         r'k-trays-string.*spec\.computeTrays')
    kube("k-index-string",
         lambda r: r["spec"]["computeTrays"][0].__setitem__("index", "one"),
         r'k-index-string.*spec\.computeTrays\[0\]\.index')
    kube("k-unknown-field", lambda r: r["spec"].__setitem__("turboMode", True),
         r'unknown field "spec\.turboMode"')
    kube("k-10000-trays",
         lambda r: r["spec"].__setitem__(
             "computeTrays", [{"index": 1 + i % 18, "node": "n%05d" % i} for i in range(10000)]),
         r'k-10000-trays.*spec\.computeTrays')
    kube("k-deep-location", lambda r: r["spec"].__setitem__("location", nest(200, "x")),
         r'k-deep-location.*(spec\.location|nest|depth|unknown field)')
    # 10,000 annotations of 40 bytes: over the apiserver's 256 KiB total.
    kube("k-10000-annotations",
         lambda r: r["metadata"].__setitem__(
             "annotations", {"nvl72.io/a%05d" % i: "v" * 24 for i in range(10000)}),
         r'metadata\.annotations: Too long')

    # Straight to the webhook: its own parsers answer.
    hook("w-huge-serial", lambda rv, r: r["spec"].__setitem__("chassisSerial", mib), "deny",
         r'w-huge-serial.*spec\.chassisSerial')
    hook("w-trays-string",
         lambda rv, r: r["spec"].__setitem__("computeTrays", "eighteen"), "deny",
         r'w-trays-string.*spec\.computeTrays')
    hook("w-index-string",
         lambda rv, r: r["spec"]["computeTrays"][0].__setitem__("index", "one"), "deny",
         r'w-index-string.*spec\.computeTrays\[0\]\.index')
    hook("w-10000-trays",
         lambda rv, r: r["spec"].__setitem__(
             "computeTrays", [{"index": 1 + i % 18, "node": "n%05d" % i} for i in range(10000)]),
         "deny", r'w-10000-trays.*spec\.computeTrays')
    hook("w-unknown-field", lambda rv, r: r["spec"].__setitem__("turboMode", {"x": [1, 2]}),
         "handled", r'.')
    hook("w-object-string",
         lambda rv, r: rv["request"].__setitem__("object", "a rack"), "deny",
         r'request\.object')
    hook("w-operation-number",
         lambda rv, r: rv["request"].__setitem__("operation", 7), "deny",
         r'request\.operation')
    hook("w-deep-object", lambda rv, r: r["spec"].__setitem__("location", nest(100, "x")),
         "http-413", r'nesting deeper than 48')
    # Just over the 3 MiB review cap.
    hook("w-over-cap",
         lambda rv, r: r["metadata"].__setitem__(
             "annotations", {"pad": "y" * (3 * (1 << 20) + 1024)}), "http-413", r'.')
    write(out, "w-not-json", None, "webhook", "http-400", r'.', raw='{"request": {"uid": ')
    nouid = copy.deepcopy(review)
    del nouid["request"]["uid"]
    write(out, "w-no-uid", nouid, "webhook", "http-400", r'uid')
    write(out, "w-array", None, "webhook", "http-413", r'nesting deeper than 48',
          raw="[" * 5000 + "]" * 5000)


if __name__ == "__main__":
    main()
