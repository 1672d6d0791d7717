#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One address in front of several: a loopback TCP forwarder, as a Service
in front of two operator replicas would be.

Each accepted connection is relayed, bytes as they come (TLS passes through
untouched), to the first backend that accepts a connection, trying them
from the one after the last used, so that the load alternates while both
live and a dead one costs a refused connect, not a failed request. One line
per connection goes to the log: `<monotonic s> <backend port|none>`.

usage: tcpfwd.py --port PORT --backend PORT [--backend PORT ...] --log FILE
"""
import argparse
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from nsforward import pipe  # noqa: E402  (the same byte relay, one direction)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--backend", type=int, action="append", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    logf = open(args.log, "a", buffering=1, encoding="ascii")
    lock = threading.Lock()
    state = {"next": 0}
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(64)

    def serve(client):
        with lock:
            start = state["next"]
            state["next"] = (start + 1) % len(args.backend)
        upstream, used = None, "none"
        for k in range(len(args.backend)):
            port = args.backend[(start + k) % len(args.backend)]
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=1)
                upstream.settimeout(None)
                used = str(port)
                break
            except OSError:
                continue
        with lock:
            logf.write("%.3f %s\n" % (time.monotonic(), used))
        if upstream is None:
            client.close()
            return
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
        pipe(client, upstream)

    while True:
        conn, _ = lsock.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
