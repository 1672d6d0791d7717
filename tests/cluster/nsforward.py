#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Relays TCP from the test node's network namespace to the API server on the
# machine's loopback: it listens where it is started and dials out from the
# network namespace given as an open file descriptor.
"""usage: nsforward.py LISTEN_ADDR:PORT TARGET_ADDR:PORT NETNS_FD"""
import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000


def setns(fd):
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "setns: " + os.strerror(err))


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, target):
    try:
        out = socket.create_connection(target, timeout=10)
        out.settimeout(None)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(out, conn), daemon=True).start()
    pipe(conn, out)
    conn.close()
    out.close()


def split(addr):
    host, _, port = addr.rpartition(":")
    return host, int(port)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    listen, target, fd = split(sys.argv[1]), split(sys.argv[2]), int(sys.argv[3])
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(listen)
    srv.listen(128)
    # The listening socket stays in this namespace; every socket made from
    # here on, and every thread started, belongs to the target's.
    setns(fd)
    os.close(fd)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, target), daemon=True).start()


if __name__ == "__main__":
    main()
