#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One address in front of several: a loopback TCP forwarder, as a Service
in front of two operator replicas would be, or a network path to the
apiserver that can go silent.

Each accepted connection is relayed, bytes as they come (TLS passes through
untouched), to the first backend that accepts a connection, trying them
from the one after the last used, so that the load alternates while both
live and a dead one costs a refused connect, not a failed request. One line
per connection goes to the log: `<monotonic s> <backend port|none>`.

With --control FILE, the file names a mode, re-read every 100 ms:

    pass        relay everything (the default)
    freeze      every connection open at the switch stops relaying in both
                directions and is never closed: packets dropped on a path
                that stays up, as a failed middlebox or a partition does.
                Connections accepted later relay normally, as a new path
                through a load balancer would. The log gets
                `<monotonic s> freeze <connections frozen>`.

usage: tcpfwd.py --port PORT --backend PORT [--backend PORT ...] --log FILE
                 [--control FILE]
"""
import argparse
import select
import socket
import threading
import time


class Relay:
    """The connections and the one switch between them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.open = set()
        self.frozen = set()

    def freeze(self):
        with self.lock:
            self.frozen |= self.open
            return len(self.open)

    def is_frozen(self, conn_id):
        with self.lock:
            return conn_id in self.frozen

    def run(self, conn_id, a, b):
        """Relays a<->b until either side closes, or forever once frozen."""
        with self.lock:
            self.open.add(conn_id)
        peer = {a: b, b: a}
        try:
            while True:
                if self.is_frozen(conn_id):
                    time.sleep(1)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peer[s].sendall(data)
        except OSError:
            return
        finally:
            with self.lock:
                self.open.discard(conn_id)
            if not self.is_frozen(conn_id):
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()


def watch_control(path, relay, record):
    mode = "pass"
    while True:
        try:
            with open(path, encoding="ascii") as f:
                now = f.read().strip() or "pass"
        except OSError:
            now = "pass"
        if now != mode:
            mode = now
            if mode == "freeze":
                record("%.3f freeze %d" % (time.monotonic(), relay.freeze()))
            else:
                record("%.3f mode %s" % (time.monotonic(), mode))
        time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--backend", type=int, action="append", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--control")
    args = ap.parse_args()
    logf = open(args.log, "a", buffering=1, encoding="ascii")
    lock = threading.Lock()
    state = {"next": 0, "id": 0}
    relay = Relay()

    def record(line):
        with lock:
            logf.write(line + "\n")

    if args.control:
        threading.Thread(target=watch_control, args=(args.control, relay, record),
                         daemon=True).start()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", args.port))
    lsock.listen(64)

    def serve(client, conn_id):
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
        record("%.3f %s" % (time.monotonic(), used))
        if upstream is None:
            client.close()
            return
        relay.run(conn_id, client, upstream)

    while True:
        conn, _ = lsock.accept()
        state["id"] += 1
        threading.Thread(target=serve, args=(conn, state["id"]), daemon=True).start()


if __name__ == "__main__":
    main()
