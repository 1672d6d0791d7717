#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Builds a container image from one of the Dockerfiles in deploy/docker/
# without a registry or a container engine, into a reproducible OCI archive
# with an SPDX 2.3 SBOM of its Debian packages and our binary.
"""usage: oci-build.py --dockerfile F --name REF --out OUT.tar --sbom OUT.spdx.json
                    --bin-dir DIR --cache DIR --epoch N [--arch amd64] [--mirror URL]

The Dockerfile stays the source of what goes in the image: its instructions
are read and carried out here, and an instruction this builder does not
know stops the build. What differs from a Docker build, on purpose:
  - FROM debian:RELEASE-slim is a base made here with debootstrap (minbase)
    from Debian's mirror, trimmed as Debian's slim images are; FROM scratch
    is empty; no other image is accepted.
  - The stage named `build` is not run: the project's normal build made the
    binaries, and COPY --from=build /src/build/rel/bin/NAME takes NAME from
    --bin-dir.
  - RUN runs with /bin/sh -c in a chroot of the stage's root (root only).
    For another architecture than the machine's, proot runs the stage's
    root with every program in it under qemu-ARCH-static (no binfmt_misc),
    and the base's debootstrap runs its second stage that way.
  - The image has one layer; every file's time is --epoch; logs, caches and
    other traces of the build are removed after each RUN.
The base, and the result of a stage's first RUN when it installs packages
with apt-get, are cached under --cache by the versions of the Debian
packages they hold, so a second build reuses them.
"""
import argparse
import ctypes
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KNOWN = {"FROM", "ARG", "RUN", "COPY", "LABEL", "ENV", "USER", "EXPOSE", "ENTRYPOINT", "WORKDIR"}
# What Debian's slim images leave out, kept out of later package installs too.
SLIM_CFG = """# Written by the nvl72 image builder: what the slim base leaves out.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
# Files a package's maintainer script makes, which dpkg's lists do not name.
GENERATED = {"etc/ssl/certs/ca-certificates.crt": "ca-certificates"}


def die(msg):
    sys.exit("oci-build: " + msg)


def log(msg):
    print("oci-build: " + msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------- parsing ---
def logical_lines(path):
    """Yields (lineno, text, heredoc bodies) with continuations joined."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i, n = 0, len(lines)
    while i < n:
        start, text = i + 1, lines[i]
        i += 1
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        while text.endswith("\\"):
            text = text[:-1]
            while i < n and lines[i].lstrip().startswith("#"):
                i += 1
            if i >= n:
                die("%s:%d: a continuation runs past the end" % (path, start))
            text += lines[i]
            i += 1
        docs = []
        for m in re.finditer(r"<<-?(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", text):
            body = []
            while i < n and lines[i] != m.group(2):
                body.append(lines[i])
                i += 1
            if i >= n:
                die("%s:%d: heredoc %s is not closed" % (path, start, m.group(2)))
            i += 1
            docs.append("\n".join(body) + "\n")
        yield start, text, docs


def parse(path):
    """The Dockerfile as global ARGs and stages of (lineno, op, rest, docs)."""
    gargs, stages = {}, []
    for no, text, docs in logical_lines(path):
        op, _, rest = text.strip().partition(" ")
        op = op.upper()
        if op not in KNOWN:
            die("%s:%d: instruction %s is not supported by this builder" % (path, no, op))
        if op == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            if len(words) not in (1, 3) or (len(words) == 3 and name is None):
                die("%s:%d: FROM %s: expected IMAGE [AS NAME]" % (path, no, rest))
            stages.append({"from": words[0], "name": name, "steps": [], "line": no})
        elif not stages:
            if op != "ARG":
                die("%s:%d: %s before the first FROM" % (path, no, op))
            k, _, v = rest.strip().partition("=")
            gargs[k] = v
        else:
            stages[-1]["steps"].append((no, op, rest.strip(), docs))
    if not stages:
        die("%s: no FROM" % path)
    return gargs, stages


def subst(text, env):
    def one(m):
        k = m.group(1) or m.group(2)
        return env.get(k, "")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", one, text)


def kv_pairs(rest, where):
    """LABEL/ENV KEY=VALUE pairs (values may be quoted)."""
    out = {}
    for w in shlex.split(rest.replace("\\\n", " ")):
        k, eq, v = w.partition("=")
        if not eq:
            die("%s: expected KEY=VALUE, got %r" % (where, w))
        out[k] = v
    return out


# ------------------------------------------------------- the apt index ---
class Apt:
    """Debian's index for one architecture in a private apt state, to know
    which versions a base or an install would get before making it."""

    def __init__(self, cache, arch, mirror, release):
        self.dir = os.path.join(cache, "apt-" + arch)
        os.makedirs(os.path.join(self.dir, "state/lists/partial"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "cache/archives/partial"), exist_ok=True)
        open(os.path.join(self.dir, "status"), "a").close()
        with open(os.path.join(self.dir, "sources.list"), "w") as f:
            f.write("deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n"
                    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s-updates main\n"
                    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                    "%s-security %s-security main\n" % (mirror, release, mirror, release,
                                                         mirror.rstrip("/"), release))
        self.opts = [
            "-o", "Dir::State=" + os.path.join(self.dir, "state"),
            "-o", "Dir::State::status=" + os.path.join(self.dir, "status"),
            "-o", "Dir::Cache=" + os.path.join(self.dir, "cache"),
            "-o", "Dir::Etc::SourceList=" + os.path.join(self.dir, "sources.list"),
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", "APT::Architecture=" + arch,
            "-o", "APT::Architectures::=" + arch,
            "-o", "Debug::NoLocking=1",
        ]
        run(["apt-get", "-qq"] + self.opts + ["update"])
        # The packages of priority `required` (what debootstrap's minbase
        # installs, with apt), kept per version of the index.
        lists = os.path.join(self.dir, "state/lists")
        h = hashlib.sha256()
        for f in sorted(os.listdir(lists)):
            if f.endswith("InRelease"):
                with open(os.path.join(lists, f), "rb") as fh:
                    h.update(fh.read())
        self.id = h.hexdigest()[:16]
        # What was worked out for an older index goes.
        for f in os.listdir(self.dir):
            if f.startswith(("required-", "resolved-")) and self.id not in f:
                os.unlink(os.path.join(self.dir, f))
        memo = os.path.join(self.dir, "required-" + self.id)
        if not os.path.exists(memo):
            avail = subprocess.run(["apt-cache"] + self.opts + ["dumpavail"], check=True,
                                   capture_output=True, text=True).stdout
            names = sorted({m.group(1) for m in re.finditer(
                r"^Package: (\S+)\n(?:.+\n)*?Priority: required$", avail, re.M)})
            with open(memo + ".tmp", "w") as fh:
                fh.write("\n".join(names) + "\n")
            os.replace(memo + ".tmp", memo)
        with open(memo) as fh:
            self.required = fh.read().split()

    def resolve(self, pkgs):
        """NAME=VERSION of everything installing pkgs on an empty system
        gives, kept per version of the index (apt takes seconds)."""
        memo = os.path.join(self.dir, "resolved-%s-%s" % (self.id, key_of(*sorted(pkgs))))
        if os.path.exists(memo):
            with open(memo) as fh:
                return fh.read().split()
        out = subprocess.run(["apt-get", "-s", "--no-install-recommends"] + self.opts +
                             ["install"] + sorted(pkgs), capture_output=True, text=True)
        if out.returncode != 0:
            die("apt cannot resolve %s:\n%s" % (" ".join(pkgs), out.stderr or out.stdout))
        got = sorted("%s=%s" % g for g in re.findall(r"^Inst (\S+) \((\S+)", out.stdout, re.M))
        with open(memo + ".tmp", "w") as fh:
            fh.write("\n".join(got) + "\n")
        os.replace(memo + ".tmp", memo)
        return got


def run(cmd, **kw):
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        die("%s failed (exit %d)" % (" ".join(cmd[:3]), r.returncode))


def key_of(*parts):
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# ------------------------------------------------------- root file systems ---
def scrub(root, epoch):
    """Removes what a build leaves behind that would differ between builds."""
    for d in ("var/log", "var/cache/apt", "var/cache/ldconfig", "tmp", "run", "var/tmp"):
        p = os.path.join(root, d)
        if not os.path.isdir(p):
            continue
        for base, dirs, files in os.walk(p):
            for f in files:
                os.unlink(os.path.join(base, f))
    for d in ("var/lib/dpkg", "var/cache/debconf", "etc"):
        p = os.path.join(root, d)
        for f in os.listdir(p) if os.path.isdir(p) else []:
            if f.endswith("-old") or (d == "etc" and f in ("hostname", "hosts", "resolv.conf")):
                fp = os.path.join(p, f)
                if os.path.isfile(fp) or os.path.islink(fp):
                    os.unlink(fp)
    # The shadow files keep the day of each account's last password change.
    day = str(epoch // 86400)
    for f in ("etc/shadow", "etc/shadow-"):
        p = os.path.join(root, f)
        if not os.path.isfile(p):
            continue
        with open(p) as fh:
            rows = [r.split(":") for r in fh.read().splitlines()]
        with open(p, "w") as fh:
            for r in rows:
                if len(r) > 2 and r[2]:
                    r[2] = day
                fh.write(":".join(r) + "\n")


def save(root, tarpath):
    tmp = tarpath + ".tmp"
    run(["tar", "--numeric-owner", "-C", root, "-cpf", tmp, "."])
    os.replace(tmp, tarpath)


def load(tarpath, root):
    os.makedirs(root)
    run(["tar", "--numeric-owner", "-C", root, "-xpf", tarpath])


def run_env(env):
    full = {"PATH": DEFAULT_PATH, "HOME": "/root", "DEBIAN_FRONTEND": "noninteractive"}
    full.update(env)
    return full


class Native:
    """RUN for the machine's own architecture: a chroot of the stage's root,
    in a private mount namespace with /proc and the machine's /dev."""

    foreign = False

    def run(self, root, argv, env):
        """The exit status of ARGV run as root in ROOT."""
        wrap = ('set -e; r="$1"; shift; mount -t proc proc "$r/proc"; '
                'mount --bind /dev "$r/dev"; exec chroot "$r" "$@"')
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", wrap,
                               "sh", root] + argv, env=run_env(env),
                              stdin=subprocess.DEVNULL).returncode

    def close(self):
        pass


# Host system calls with a path that proot 5.1 (Debian 12) predates and so
# passes to the kernel untranslated: they would name the machine's files
# rather than the stage's (QEMU makes them for the emulated program; the C
# library's faccessat() tries faccessat2 first). They fail with ENOSYS
# instead, and the C library and QEMU fall back to calls proot translates
# (faccessat, newfstatat, openat, fchmodat). Numbers: Linux v6.6,
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
UNTRANSLATED = {
    # machine: (AUDIT_ARCH_*, include/uapi/linux/audit.h; statx, openat2, faccessat2, fchmodat2)
    "x86_64": (0xC000003E, (332, 437, 439, 452)),
    "aarch64": (0xC00000B7, (291, 437, 439, 452)),
}


def deny_untranslated():
    """Installs a seccomp filter: UNTRANSLATED calls fail with ENOSYS."""
    audit, nrs = UNTRANSLATED[os.uname().machine]
    # struct sock_filter {u16 code; u8 jt, jf; u32 k} (include/uapi/linux/filter.h);
    # BPF_LD|BPF_W|BPF_ABS = 0x20, BPF_JMP|BPF_JEQ|BPF_K = 0x15, BPF_RET|BPF_K = 0x06;
    # struct seccomp_data {int nr; u32 arch; ...} (include/uapi/linux/seccomp.h).
    def ins(code, jt, jf, k):
        return struct.pack("HBBI", code, jt, jf, k)
    allow, enosys = 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO|ENOSYS
    prog = ins(0x20, 0, 0, 4) + ins(0x15, 1, 0, audit) + ins(0x06, 0, 0, allow) + ins(0x20, 0, 0, 0)
    for i, nr in enumerate(nrs):
        prog += ins(0x15, len(nrs) - i, 0, nr)
    prog += ins(0x06, 0, 0, allow) + ins(0x06, 0, 0, enosys)

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = Fprog(len(prog) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    # prctl(PR_SET_SECCOMP = 22, SECCOMP_MODE_FILTER = 2, &fprog)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp filter")


class Emulated:
    """RUN for another architecture without binfmt_misc: proot (Debian
    package proot) runs the stage's root as /, and with -q it starts every
    program of that root, and every program those start, under QEMU's user
    mode emulator (qemu-user-static), by intercepting execve with ptrace."""

    foreign = True

    def __init__(self, arch):
        cpu = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
        self.qemu = shutil.which("qemu-%s-static" % cpu)
        self.proot = shutil.which("proot")
        machine = os.uname().machine
        if not self.qemu or not self.proot:
            die("building for %s on %s runs its programs under qemu-%s-static and proot, "
                "not both found on PATH (tests/deps.sh installs proot and unpacks "
                "qemu-aarch64-static from Debian's qemu-user-static into NVL72_CACHE/qemu)"
                % (arch, machine, cpu))
        if machine not in UNTRANSLATED:
            die("building for %s on %s: no emulation set up for this machine" % (arch, machine))
        # The stage's root is bound at DIR/root, and proot's loader copied to
        # DIR/loader: both reachable by any user (apt runs its helpers as
        # _apt), whatever the modes of the folders above the build.
        self.dir = tempfile.mkdtemp(prefix="nvl72-emu-")
        os.chmod(self.dir, 0o755)
        os.mkdir(os.path.join(self.dir, "root"), 0o755)
        self.loader = os.path.join(self.dir, "loader")
        # proot writes the loader it starts programs with to
        # /tmp/prooted-PID-* with mode 0500: a program that changed its user
        # (apt runs apt-key as _apt) could not be started. Its environment
        # variable PROOT_LOADER names another copy.
        r = subprocess.run([self.proot, "-r", "/", "/bin/sh", "-c",
                            'exec cat /tmp/prooted-"$PPID"-*'], capture_output=True)
        if r.returncode != 0 or not r.stdout.startswith(b"\x7fELF"):
            die("could not copy proot's loader: %s" % r.stderr.decode(errors="replace")[-300:])
        with open(self.loader, "wb") as f:
            f.write(r.stdout)
        os.chmod(self.loader, 0o755)

    def run(self, root, argv, env, binds=("/proc", "/dev"), stdout=None):
        """The exit status of ARGV run as root in ROOT, with the machine's
        BINDS in it."""
        mnt = os.path.join(self.dir, "root")
        wrap = 'set -e; r="$1"; m="$2"; shift 2; mount --bind "$r" "$m"; exec "$@"'
        cmd = [self.proot, "-r", mnt, "-q", self.qemu, "-w", "/"]
        for b in binds:
            cmd += ["-b", b]
        full = run_env(env)
        full["PROOT_LOADER"] = self.loader
        return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", wrap,
                               "sh", root, mnt] + cmd + argv, env=full, stdin=subprocess.DEVNULL,
                              stdout=stdout, stderr=subprocess.STDOUT if stdout else None,
                              preexec_fn=deny_untranslated).returncode

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def host_arch():
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def chroot_sh(runner, root, script, env):
    """RUN: /bin/sh -c SCRIPT as root in the stage's root, with the machine's DNS."""
    shutil.copyfile("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
    rc = runner.run(root, ["/bin/sh", "-c", script], env)
    if rc != 0:
        die("RUN failed (exit %d): %s" % (rc, script[:200]))


def make_base(runner, root, arch, release, mirror, apt, epoch):
    log("making the %s-slim base for %s with debootstrap%s" % (
        release, arch, " (second stage emulated)" if runner.foreign else ""))
    # In a mount namespace of its own: the mounts debootstrap makes in the
    # target go with it, also when it fails. For another architecture the
    # first stage only fetches and unpacks the packages (--foreign); the
    # second, which runs their maintainer scripts, runs under emulation.
    foreign = ["--foreign"] if runner.foreign else []
    with open(root + ".log", "w") as out:
        rc = subprocess.run(["unshare", "--mount", "--propagation", "private", "debootstrap"] +
                            foreign + ["--variant=minbase", "--arch=" + arch, release, root, mirror],
                            stdout=out, stderr=subprocess.STDOUT).returncode
        if rc == 0 and runner.foreign:
            # In a container the first stage makes /proc a link to the
            # machine's /proc, which proot cannot bind the machine's /proc
            # over: it becomes the folder the second stage would make.
            proc = os.path.join(root, "proc")
            if os.path.islink(proc):
                os.unlink(proc)
                os.mkdir(proc, 0o755)
            rc = runner.run(root, ["/debootstrap/debootstrap", "--second-stage"], {},
                            binds=("/proc", "/dev", "/sys"), stdout=out)
    if rc != 0:
        with open(root + ".log") as f:
            sys.stderr.write("".join(f.readlines()[-20:]))
        die("debootstrap of %s for %s failed (exit %d)" % (release, arch, rc))
    os.unlink(root + ".log")
    os.makedirs(os.path.join(root, "etc/dpkg/dpkg.cfg.d"), exist_ok=True)
    with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/slim"), "w") as f:
        f.write(SLIM_CFG)
    with open(os.path.join(root, "etc/apt/sources.list"), "w") as f:
        f.write(open(os.path.join(apt.dir, "sources.list")).read()
                .replace("[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ", ""))
    chroot_sh(runner, root, "apt-get update -qq && apt-get upgrade -y -qq >/dev/null "
              "&& rm -rf /var/lib/apt/lists/*", {})
    slim = ("cd / && find usr/share/doc -mindepth 2 ! -name copyright ! -type d -delete; "
            "find usr/share/doc -depth -mindepth 1 -type d -empty -delete; "
            "rm -rf usr/share/man/* usr/share/groff/* usr/share/info/* usr/share/lintian/* "
            "usr/share/linda/*; find usr/share/locale -mindepth 1 -maxdepth 1 "
            "! -name locale.alias -exec rm -rf {} +")
    chroot_sh(runner, root, slim, {})
    scrub(root, epoch)


# ------------------------------------------------------------- the layer ---
def layer(root, out, epoch):
    """Writes ROOT as a tar with sorted entries, one time, numeric owners."""
    skip = {"dev", "proc", "sys"}
    seen = {}
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for base, dirs, files in os.walk(root):
            rel = os.path.relpath(base, root)
            if rel in skip:
                dirs[:] = []
                continue
            dirs.sort()
            for name in sorted(dirs + files):
                path = os.path.join(base, name)
                arc = name if rel == "." else rel + "/" + name
                st = os.lstat(path)
                info = tarfile.TarInfo(arc)
                info.mtime, info.uid, info.gid = epoch, st.st_uid, st.st_gid
                info.uname = info.gname = ""
                info.mode = st.st_mode & 0o7777
                data = None
                if os.path.islink(path):
                    info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                elif os.path.isdir(path):
                    info.type = tarfile.DIRTYPE
                elif os.path.isfile(path):
                    ino = (st.st_dev, st.st_ino)
                    if st.st_nlink > 1 and ino in seen:
                        info.type, info.linkname = tarfile.LNKTYPE, seen[ino]
                    else:
                        seen[ino] = arc
                        info.size, data = st.st_size, open(path, "rb")
                else:
                    die("%s: a special file in the image (only files, links, folders)" % arc)
                tar.addfile(info, data)
                if data:
                    data.close()
    # os.walk lists a folder's entries before it descends, so entries are
    # sorted within each folder and every parent comes before its children.


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------ the build ---
class Build:
    def __init__(self, a, gargs, stages):
        self.a, self.gargs, self.stages = a, gargs, stages
        self.work = a.out + ".work"
        self.apt = None
        self.runner = Native() if a.arch == host_arch() else Emulated(a.arch)
        self.binaries = []  # (path in image, sha256, name)
        self.done = {}

    def stage(self, ref):
        for i, s in enumerate(self.stages):
            if s["name"] == ref or str(i) == ref:
                return i, s
        return None, None

    def index(self):
        if self.apt is None:
            self.apt = Apt(self.a.cache, self.a.arch, self.a.mirror, self.a.release)
        return self.apt

    def base(self):
        """The key, packages and tar of the Debian base, made if not cached."""
        apt = self.index()
        pkgs = apt.required + ["apt"]
        key = key_of(self.a.release, self.a.arch, SLIM_CFG, *apt.resolve(pkgs))
        tar = os.path.join(self.a.cache, "base-%s-%s-%s.tar" % (self.a.release, self.a.arch, key))
        if not os.path.exists(tar):
            tmp = os.path.join(self.work, "base")
            shutil.rmtree(tmp, ignore_errors=True)
            make_base(self.runner, tmp, self.a.arch, self.a.release, self.a.mirror, apt, self.a.epoch)
            save(tmp, tar)
            shutil.rmtree(tmp)
        else:
            log("base %s from the cache" % os.path.basename(tar))
        return key, pkgs, tar

    def unpack(self, st):
        """Loads the stage's base into its root, where that was left for later."""
        if st["pending"]:
            load(st["pending"], st["root"])
            st["pending"] = None

    def build(self, idx):
        """Builds stage idx into WORK/stage-idx and returns its state."""
        if idx in self.done:
            return self.done[idx]
        s = self.stages[idx]
        where = "%s:%d" % (self.a.dockerfile, s["line"])
        root = os.path.join(self.work, "stage-%d" % idx)
        st = {"root": root, "env": {}, "args": {}, "labels": {}, "user": "", "ports": [],
              "entrypoint": None, "workdir": "/", "deb": False, "pending": None}
        image = subst(s["from"], self.gargs)
        base_key = pkgs = None
        if image == "scratch":
            os.makedirs(root)
        elif image == "debian:%s-slim" % self.a.release:
            # Loaded when a step needs the files: a first RUN that installs
            # packages may come from the cache whole.
            base_key, pkgs, st["pending"] = self.base()
            st["deb"] = True
        elif self.stage(image)[1] is not None:
            prev = self.build(self.stage(image)[0])
            run(["cp", "-a", prev["root"], root])
            st.update({k: prev[k] for k in ("env", "labels", "user", "entrypoint", "deb")})
        else:
            die("%s: FROM %s: only scratch, debian:%s-slim (made here) or an earlier "
                "stage" % (where, image, self.a.release))
        for no, op, rest, docs in s["steps"]:
            where = "%s:%d" % (self.a.dockerfile, no)
            if op == "RUN":
                # Cached only when it is the first step on the base's files.
                self.run_step(st, rest, where, base_key if st["pending"] else None, pkgs)
            else:
                if op == "COPY":
                    self.unpack(st)
                getattr(self, "op_" + op.lower())(st, rest, docs, where)
        self.unpack(st)
        self.done[idx] = st
        return st

    def run_step(self, st, script, where, base_key, pkgs):
        if script.startswith("["):
            die("%s: RUN in exec form is not supported (use the shell form)" % where)
        env = dict(st["args"])
        env.update(st["env"])
        m = re.search(r"apt-get install((?:\s+\S+)+?)\s*(?:&&|$)", script)
        if base_key is None or m is None:
            self.unpack(st)
            chroot_sh(self.runner, st["root"], script, env)
            scrub(st["root"], self.a.epoch)
            return
        want = [w for w in m.group(1).split() if not w.startswith("-")]
        got = self.index().resolve(pkgs + want)
        key = key_of(base_key, script, *got)
        tar = os.path.join(self.a.cache, "run-%s-%s.tar" % (self.a.arch, key))
        if os.path.exists(tar):
            log("%s: RUN apt-get install %s from the cache" % (where, " ".join(want)))
            st["pending"] = None
            shutil.rmtree(st["root"], ignore_errors=True)
            load(tar, st["root"])
            return
        self.unpack(st)
        chroot_sh(self.runner, st["root"], script, env)
        scrub(st["root"], self.a.epoch)
        save(st["root"], tar)

    def op_arg(self, st, rest, docs, where):
        k, eq, v = rest.partition("=")
        auto = {"TARGETARCH": self.a.arch, "TARGETOS": "linux",
                "TARGETPLATFORM": "linux/" + self.a.arch}
        st["args"][k] = v if eq else auto.get(k, self.gargs.get(k, ""))

    def op_label(self, st, rest, docs, where):
        st["labels"].update(kv_pairs(rest, where))

    def op_env(self, st, rest, docs, where):
        st["env"].update(kv_pairs(rest, where))

    def op_user(self, st, rest, docs, where):
        st["user"] = rest

    def op_workdir(self, st, rest, docs, where):
        st["workdir"] = rest

    def op_expose(self, st, rest, docs, where):
        st["ports"] += [p if "/" in p else p + "/tcp" for p in rest.split()]

    def op_entrypoint(self, st, rest, docs, where):
        try:
            ep = json.loads(rest)
        except ValueError:
            ep = None
        if not isinstance(ep, list) or not all(isinstance(x, str) for x in ep):
            die("%s: ENTRYPOINT must be a JSON list of strings (exec form)" % where)
        st["entrypoint"] = ep

    def op_copy(self, st, rest, docs, where):
        flags, words = {}, rest.split()
        while words and words[0].startswith("--"):
            k, _, v = words.pop(0)[2:].partition("=")
            if k not in ("from", "chmod"):
                die("%s: COPY --%s is not supported" % (where, k))
            flags[k] = v
        mode = int(flags["chmod"], 8) if "chmod" in flags else None
        if docs:
            if len(words) != 2 or not words[0].startswith("<<"):
                die("%s: COPY of a heredoc: expected COPY <<'EOF' DEST" % where)
            dest = self.target(st, words[1])
            with open(dest, "w") as f:
                f.write(docs[0])
            os.chmod(dest, mode if mode is not None else 0o644)
            return
        if len(words) != 2 or "from" not in flags:
            die("%s: COPY needs --from=STAGE SRC DEST (there is no build context)" % where)
        src, dest = words
        if flags["from"] == "build":
            m = re.fullmatch(r"/src/build/rel/bin/([A-Za-z0-9_.-]+)", src)
            if not m:
                die("%s: COPY --from=build takes /src/build/rel/bin/NAME only" % where)
            path = os.path.join(self.a.bin_dir, m.group(1))
            if not os.path.isfile(path):
                die("%s: %s is missing: build it first (make)" % (where, path))
            out = self.target(st, dest + (m.group(1) if dest.endswith("/") else ""))
            shutil.copyfile(path, out)
            os.chmod(out, mode if mode is not None else 0o755)
            inner = os.path.relpath(out, st["root"])
            self.binaries.append((inner, sha256_file(out), m.group(1)))
            return
        idx, _ = self.stage(flags["from"])
        if idx is None:
            die("%s: COPY --from=%s: no such stage" % (where, flags["from"]))
        prev = self.build(idx)
        from_path = os.path.join(prev["root"], src.lstrip("/"))
        if src.endswith("/"):
            os.makedirs(os.path.join(st["root"], dest.lstrip("/")), exist_ok=True)
            run(["cp", "-a", from_path + ".", os.path.join(st["root"], dest.lstrip("/"))])
        else:
            run(["cp", "-a", from_path, self.target(st, dest)])
        for inner, digest, name in list(self.binaries):
            if src.endswith("/") and inner.startswith(src.lstrip("/")):
                moved = os.path.join(dest.lstrip("/"), inner[len(src.lstrip("/")):])
                self.binaries.append((os.path.normpath(moved), digest, name))

    def target(self, st, dest):
        """The path under the stage's root for DEST, its folders made."""
        if not dest.startswith("/"):
            dest = os.path.join(st["workdir"], dest)
        out = os.path.join(st["root"], dest.lstrip("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        return out


# ----------------------------------------------------------------- SBOM ---
def dpkg_status(root):
    """{name: (version, arch)} of the packages installed in ROOT."""
    p = os.path.join(root, "var/lib/dpkg/status")
    if not os.path.isfile(p):
        return {}
    out = {}
    with open(p, encoding="utf-8") as f:
        for para in f.read().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", para, re.M))
            if fields.get("Status", "").endswith(" installed") and "Package" in fields:
                out[fields["Package"]] = (fields["Version"], fields.get("Architecture", ""))
    return out


def owners_by_content(roots):
    """{md5: package} from the dpkg md5sums of each Debian root."""
    out = {}
    for root in roots:
        info = os.path.join(root, "var/lib/dpkg/info")
        for f in sorted(os.listdir(info)) if os.path.isdir(info) else []:
            if f.endswith(".md5sums"):
                pkg = f[:-len(".md5sums")].split(":")[0]
                with open(os.path.join(info, f), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        md5 = line.split(" ", 1)[0]
                        out.setdefault(md5, pkg)
    return out


def packages_in(final, debian_roots):
    """The Debian packages in the image: its dpkg status, or for an image
    without one, the packages whose files it holds (matched by content)."""
    own = dpkg_status(final)
    if own:
        return own
    status = {}
    for r in debian_roots:
        status.update(dpkg_status(r))
    md5s = owners_by_content(debian_roots)
    found = set()
    for base, _, files in os.walk(final):
        for f in files:
            p = os.path.join(base, f)
            if os.path.islink(p):
                continue
            rel = os.path.relpath(p, final)
            h = hashlib.md5()
            with open(p, "rb") as fh:
                h.update(fh.read())
            pkg = md5s.get(h.hexdigest()) or GENERATED.get(rel)
            if pkg:
                found.add(pkg)
    return {p: status[p] for p in found if p in status}


def spdx(a, pkgs, binaries, labels, digest):
    distro = "debian-12" if a.release == "bookworm" else "debian-" + a.release
    image_id = "SPDXRef-Image"
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "%s %s" % (a.name, a.arch),
        "documentNamespace": "https://nvl72.invalid/spdx/%s/%s/%s" % (
            a.name.rsplit("/", 1)[-1].replace(":", "/"), a.arch, digest.split(":")[1]),
        "creationInfo": {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(a.epoch)),
            "creators": ["Organization: nvl72 developers", "Tool: deploy/docker/oci-build.py"],
        },
        "packages": [{
            "SPDXID": image_id, "name": a.name, "versionInfo": digest,
            "primaryPackagePurpose": "CONTAINER", "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "licenseConcluded": "NOASSERTION",
            "licenseDeclared": labels.get("org.opencontainers.image.licenses", "NOASSERTION"),
            "copyrightText": "NOASSERTION",
        }],
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                           "relatedSpdxElement": image_id}],
    }
    version = labels.get("org.opencontainers.image.version", "NOASSERTION")
    for path, sha, name in binaries:
        pid = "SPDXRef-Binary-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)
        doc["packages"].append({
            "SPDXID": pid, "name": name, "versionInfo": version,
            "primaryPackagePurpose": "APPLICATION", "supplier": "Organization: nvl72 developers",
            "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
            "checksums": [{"algorithm": "SHA256", "checksumValue": sha}],
            "licenseConcluded": "NOASSERTION", "licenseDeclared": "Apache-2.0",
            "copyrightText": "NOASSERTION", "comment": "/" + path,
        })
        doc["relationships"].append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                                     "relatedSpdxElement": pid})
    for name in sorted(pkgs):
        ver, arch = pkgs[name]
        pid = "SPDXRef-deb-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)
        purl = "pkg:deb/debian/%s@%s?arch=%s&distro=%s" % (name, ver.replace(":", "%3A"),
                                                          arch, distro)
        doc["packages"].append({
            "SPDXID": pid, "name": name, "versionInfo": ver, "supplier": "Organization: Debian",
            "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": purl}],
        })
        doc["relationships"].append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                                     "relatedSpdxElement": pid})
    return doc


# -------------------------------------------------------------- archive ---
def dump(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def add_blob(tar, data, media, path=None):
    digest = sha256_file(path) if path else hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest)
    info.mode, info.size = 0o644, os.path.getsize(path) if path else len(data)
    if path:
        with open(path, "rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media, "digest": "sha256:" + digest, "size": info.size}


def archive(a, st, layer_path):
    diff = "sha256:" + sha256_file(layer_path)
    cfg = {"User": st["user"], "WorkingDir": st["workdir"], "Labels": st["labels"],
           "Env": ["PATH=" + st["env"].get("PATH", DEFAULT_PATH)] +
           ["%s=%s" % kv for kv in sorted(st["env"].items()) if kv[0] != "PATH"]}
    if st["entrypoint"] is not None:
        cfg["Entrypoint"] = st["entrypoint"]
    if st["ports"]:
        cfg["ExposedPorts"] = {p: {} for p in st["ports"]}
    config = {"architecture": a.arch, "os": "linux", "config": cfg,
              "rootfs": {"type": "layers", "diff_ids": [diff]}}
    tmp = a.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        lay = b'{"imageLayoutVersion":"1.0.0"}'
        info = tarfile.TarInfo("oci-layout")
        info.mode, info.size = 0o644, len(lay)
        tar.addfile(info, io.BytesIO(lay))
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        cdesc = add_blob(tar, dump(config), "application/vnd.oci.image.config.v1+json")
        ldesc = add_blob(tar, None, "application/vnd.oci.image.layer.v1.tar", layer_path)
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": cdesc, "layers": [ldesc]}
        mdesc = add_blob(tar, dump(manifest), manifest["mediaType"])
        mdesc["platform"] = {"architecture": a.arch, "os": "linux"}
        mdesc["annotations"] = {"io.containerd.image.name": a.name,
                                "org.opencontainers.image.ref.name": a.name.rsplit(":", 1)[1]}
        index = dump({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                      "manifests": [mdesc]})
        info = tarfile.TarInfo("index.json")
        info.mode, info.size = 0o644, len(index)
        tar.addfile(info, io.BytesIO(index))
    os.replace(tmp, a.out)
    return mdesc["digest"]


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    for k in ("dockerfile", "name", "out", "sbom", "bin-dir", "cache"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--epoch", type=int, required=True)
    ap.add_argument("--arch", default="amd64")
    ap.add_argument("--release", default="bookworm")
    ap.add_argument("--mirror", default="http://deb.debian.org/debian")
    a = ap.parse_args()
    if os.geteuid() != 0:
        die("building an image needs root (chroot, file owners)")
    if ":" not in a.name.rsplit("/", 1)[-1]:
        die("--name %r needs a tag (name:tag)" % a.name)
    gargs, stages = parse(a.dockerfile)
    os.makedirs(a.cache, exist_ok=True)
    b = Build(a, gargs, stages)
    shutil.rmtree(b.work, ignore_errors=True)
    os.makedirs(b.work)
    try:
        st = b.build(len(stages) - 1)
        final = st["root"]
        lp = os.path.join(b.work, "layer.tar")
        layer(final, lp, a.epoch)
        digest = archive(a, st, lp)
        bins, seen = [], set()
        for path, sha, name in b.binaries:
            p = os.path.join(final, path)
            if path not in seen and os.path.isfile(p) and sha256_file(p) == sha:
                seen.add(path)
                bins.append((path, sha, name))
        debs = [s["root"] for s in b.done.values() if s["deb"]]
        doc = spdx(a, packages_in(final, debs), bins, st["labels"], digest)
        with open(a.sbom + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(a.sbom + ".tmp", a.sbom)
        with open(a.out + ".digest", "w") as f:
            f.write(digest + "\n")
        print("%s %s %s (%d Debian packages)" % (a.name, a.arch, digest, len(doc["packages"]) - 1 - len(bins)))
    finally:
        b.runner.close()
        shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    main()
