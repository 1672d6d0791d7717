#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fault-injecting HTTPS reverse proxy in front of the test kube-apiserver.

It listens on 127.0.0.1 with a certificate the test CA signed and relays every
request to the real apiserver, the client's own Authorization header included,
streaming responses as they arrive (watches too). A control file names the
mode, re-read every 100 ms:

    pass        relay everything
    429 N       answer 429 Too Many Requests with Retry-After: N
    503 [N]     answer 503 Service Unavailable (with Retry-After: N if given)
    drop        close each connection without an answer
    delay MS [PREFIX...]
                relay, but hold each request that is not a watch MS
                milliseconds first (only those whose path starts with a
                PREFIX, when any is given): a slow apiserver
    404 PREFIX...
                answer 404 Not Found, as the apiserver answers a path it
                does not serve, to each request whose path starts with a
                PREFIX (an API group that is not there); relay the others

Changing the mode ends the responses being relayed, watches included (a watch
ends as the apiserver ends one at timeoutSeconds), so clients come back
through the new mode. The log has one line per request, written when it is
answered:

    <arrival, s> <method> <path> <watch|-> <status|drop|error> <key>

where key is a digest of the request (method, path, query without
timeoutSeconds, body) that is equal for a retry of the same request; and one
line `<time> mode <mode>` per switch. Times are seconds of the monotonic clock
(time.monotonic()), so the gaps between them are true intervals even when the
wall clock is stepped during a run. Headers are never logged, so no token is.

usage: faultproxy.py --upstream https://127.0.0.1:PORT --ca CA --cert CRT
                     --key KEY --control FILE --log FILE --port-file FILE
"""
import argparse
import hashlib
import http.client
import http.server
import json
import os
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse

HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
       "trailer", "upgrade", "host", "content-length"}
MAX_BODY = 16 << 20


class Proxy(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, args):
        super().__init__(("127.0.0.1", 0), Handler)
        up = urllib.parse.urlsplit(args.upstream)
        self.up_host, self.up_port = up.hostname, up.port or 443
        self.up_ctx = ssl.create_default_context(cafile=args.ca)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["http/1.1"])
        # The handshake runs on the handler's thread, not in accept().
        self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                      do_handshake_on_connect=False)
        self.control = args.control
        self.mode = ["pass"]
        self.lock = threading.Lock()
        self.streams = set()
        self.logf = open(args.log, "a", buffering=1, encoding="ascii")

    def record(self, line):
        with self.lock:
            self.logf.write(line + "\n")

    def watch_control(self):
        """Polls the control file; a new mode cuts the responses in flight."""
        while True:
            try:
                with open(self.control, encoding="ascii") as f:
                    words = f.read().split()
            except OSError:
                words = []
            if words and words != self.mode and words[0] in ("pass", "429", "503", "drop", "delay", "404"):
                with self.lock:
                    self.mode = words
                    cut = list(self.streams)
                self.record("%.3f mode %s" % (time.monotonic(), " ".join(words)))
                for conn in cut:
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except (OSError, AttributeError):
                        pass
            time.sleep(0.1)


def status_body(code, reason, message, retry_after):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if retry_after is not None:
        st["details"] = {"retryAfterSeconds": retry_after}
    return json.dumps(st).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # the proxy keeps its own log
        pass

    def handle(self):
        try:
            self.connection.do_handshake()
        except (OSError, ssl.SSLError):
            return
        super().handle()

    def request_key(self, url, body):
        q = [(k, v) for k, v in urllib.parse.parse_qsl(url.query, keep_blank_values=True)
             if k != "timeoutSeconds"]
        h = hashlib.sha256()
        h.update(("%s %s?%s\n" % (self.command, url.path, urllib.parse.urlencode(q))).encode())
        h.update(body or b"")
        return h.hexdigest()[:12]

    def send_status(self, code, reason, message, retry_after):
        body = status_body(code, reason, message, retry_after)
        self.send_response_only(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        self.end_headers()
        self.wfile.write(body)

    def serve(self):
        srv, t0 = self.server, time.monotonic()
        url = urllib.parse.urlsplit(self.path)
        watch = "watch" if dict(urllib.parse.parse_qsl(url.query)).get("watch") in ("1", "true") else "-"
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            return
        body = self.rfile.read(n) if n else None
        key = self.request_key(url, body)
        mode = srv.mode
        if mode[0] == "drop":
            result = "drop"
            self.close_connection = True
        elif mode[0] == "429":
            self.send_status(429, "TooManyRequests", "the proxy is throttling", int(mode[1]))
            result = "429"
        elif mode[0] == "503":
            self.send_status(503, "ServiceUnavailable", "the proxy is unavailable",
                             int(mode[1]) if len(mode) > 1 else None)
            result = "503"
        elif mode[0] == "404" and any(url.path.startswith(p) for p in mode[1:]):
            self.send_status(404, "NotFound", "the server could not find the requested resource",
                             None)
            result = "404"
        else:
            if (mode[0] == "delay" and watch == "-" and
                    (len(mode) < 3 or any(url.path.startswith(p) for p in mode[2:]))):
                time.sleep(int(mode[1]) / 1000.0)
            result = self.relay(srv, body)
        srv.record("%.3f %s %s %s %s %s" % (t0, self.command, url.path, watch, result, key))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = serve

    def relay(self, srv, body):
        conn = http.client.HTTPSConnection(srv.up_host, srv.up_port, context=srv.up_ctx)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        try:
            conn.request(self.command, self.path, body=body, headers=hdrs)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.send_status(502, "ServiceUnavailable", "the proxy cannot reach the apiserver", None)
            return "error"
        length = resp.getheader("Content-Length")
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header(*(("Content-Length", length) if length is not None
                           else ("Transfer-Encoding", "chunked")))
        self.end_headers()
        with srv.lock:
            srv.streams.add(conn)
        complete = False
        try:
            while True:
                data = resp.read1(65536)
                if not data:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if length is None else data)
            complete = True
        except (OSError, http.client.HTTPException):
            pass
        finally:
            with srv.lock:
                srv.streams.discard(conn)
            conn.close()
        if length is None:
            # A cut stream ends as a finished one: the client sees the end of
            # a watch and comes back.
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True
        elif not complete:
            self.close_connection = True
        return str(resp.status)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("upstream", "ca", "cert", "key", "control", "log", "port-file"):
        ap.add_argument("--" + name, required=True)
    args = ap.parse_args()
    srv = Proxy(args)
    threading.Thread(target=srv.watch_control, daemon=True).start()
    with open(args.port_file + ".new", "w", encoding="ascii") as f:
        f.write("%d\n" % srv.server_address[1])
    # Renamed into place so a reader never sees a half-written port.
    os.replace(args.port_file + ".new", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
