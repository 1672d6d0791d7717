#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes a one-layer container image as an OCI image-layout archive that
# `ctr images import` loads, so the test node runs pods without a registry.
# The archive is reproducible: fixed times, owners and order.
"""usage: oci-image.py OUT.tar NAME [--add SRC:DEST]... [--link DEST:TARGET]...
                      [--dir DEST]... [--cmd ARG]...

NAME is the full reference the image is known by (e.g. nvl72.invalid/busybox:test).
"""
import argparse
import hashlib
import io
import json
import os
import platform
import sys
import tarfile

ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def entry(name, kind, mode, data=b"", target=""):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = kind, mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if kind == tarfile.SYMTYPE:
        info.linkname = target
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def layer(args):
    items = {}
    for d in args.dir:
        items[d.strip("/")] = entry(d.strip("/"), tarfile.DIRTYPE, 0o755)
    for spec in args.add:
        src, _, dest = spec.partition(":")
        with open(src, "rb") as f:
            data = f.read()
        mode = 0o755 if os.access(src, os.X_OK) else 0o644
        items[dest.strip("/")] = entry(dest.strip("/"), tarfile.REGTYPE, mode, data)
    for spec in args.link:
        dest, _, target = spec.partition(":")
        items[dest.strip("/")] = entry(dest.strip("/"), tarfile.SYMTYPE, 0o777, target=target)
    # Every parent folder gets an entry of its own, before its children.
    for name in list(items):
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            items.setdefault(p, entry(p, tarfile.DIRTYPE, 0o755))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(items):
            info, data = items[name]
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def blob(tar, data, media):
    digest = hashlib.sha256(data).hexdigest()
    info, _ = entry("blobs/sha256/" + digest, tarfile.REGTYPE, 0o644, data)
    tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media, "digest": "sha256:" + digest, "size": len(data)}


def dump(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("--add", action="append", default=[])
    ap.add_argument("--link", action="append", default=[])
    ap.add_argument("--dir", action="append", default=[])
    ap.add_argument("--cmd", action="append", default=[])
    args = ap.parse_args()
    if ":" not in args.name.rsplit("/", 1)[-1]:
        sys.exit("oci-image: NAME %r needs a tag (name:tag)" % args.name)
    arch = ARCH.get(platform.machine())
    if arch is None:
        sys.exit("oci-image: unknown machine %r" % platform.machine())
    data = layer(args)
    diff = "sha256:" + hashlib.sha256(data).hexdigest()
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {"Cmd": args.cmd, "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff]},
        "created": "1970-01-01T00:00:00Z",
    }
    tmp = args.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info, lay = entry("oci-layout", tarfile.REGTYPE, 0o644, b'{"imageLayoutVersion":"1.0.0"}')
        tar.addfile(info, io.BytesIO(lay))
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(entry(d, tarfile.DIRTYPE, 0o755)[0])
        cdesc = blob(tar, dump(config), "application/vnd.oci.image.config.v1+json")
        ldesc = blob(tar, data, "application/vnd.oci.image.layer.v1.tar")
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": cdesc,
            "layers": [ldesc],
        }
        mdesc = blob(tar, dump(manifest), manifest["mediaType"])
        mdesc["platform"] = {"architecture": arch, "os": "linux"}
        mdesc["annotations"] = {
            "io.containerd.image.name": args.name,
            "org.opencontainers.image.ref.name": args.name.rsplit(":", 1)[1],
        }
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [mdesc],
        }
        info, idx = entry("index.json", tarfile.REGTYPE, 0o644, dump(index))
        tar.addfile(info, io.BytesIO(idx))
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
