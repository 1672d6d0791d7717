#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A tiny Chrome DevTools Protocol client for the browser test, on the Python
# standard library alone (its own websocket framing, RFC 6455). Each call
# attaches to the first page of a headless Chromium on a loopback port,
# does one thing and detaches, so the page itself lives on between calls.
#
# usage: cdp.py PORT goto URL
#        cdp.py PORT eval EXPR            prints the value as JSON
#        cdp.py PORT wait SECONDS EXPR    until EXPR is truthy; prints it
#        cdp.py PORT shot FILE            a PNG of the viewport
#        cdp.py PORT key KEY              presses KEY (Tab, Enter, ...)
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.request

FRAME_MAX = 64 << 20  # a screenshot is a few MiB of base64 at most


class Conn:
    def __init__(self, host, port, path):
        self.sock = socket.create_connection((host, port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        req = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("devtools closed the connection during the handshake")
            head += chunk
            if len(head) > 65536:
                raise OSError("devtools handshake too large")
        head, self.rest = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise OSError("devtools refused the upgrade: " + head.split(b"\r\n")[0].decode())
        self.next_id = 0
        self.close_code = None

    def _read(self, n):
        while len(self.rest) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise OSError("devtools closed the connection")
            self.rest += chunk
        out, self.rest = self.rest[:n], self.rest[n:]
        return out

    def send_text(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        body = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
        self.sock.sendall(head + mask + body)

    def recv_text(self):
        parts = []
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            if n > FRAME_MAX:
                raise OSError("devtools frame too large")
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i & 3] for i, b in enumerate(data))
            op = b0 & 0x0F
            if op == 8:
                self.close_code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
                raise OSError("devtools closed the connection")
            if op in (9, 10):  # ping/pong: Chromium sends none, ignore them
                continue
            parts.append(data)
            if b0 & 0x80:
                return b"".join(parts).decode()

    def call(self, method, **params):
        self.next_id += 1
        want = self.next_id
        self.send_text(json.dumps({"id": want, "method": method, "params": params}))
        while True:
            msg = json.loads(self.recv_text())
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})


def page(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
        targets = json.load(r)
    for t in targets:
        if t.get("type") == "page":
            url = t["webSocketDebuggerUrl"]
            path = url.split(f"127.0.0.1:{port}", 1)[1]
            return Conn("127.0.0.1", port, path)
    raise OSError("no page target")


def evaluate(c, expr):
    r = c.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in r:
        raise RuntimeError("evaluation failed: " + json.dumps(r["exceptionDetails"])[:400])
    return r.get("result", {}).get("value")


KEYS = {"Tab": 9, "Enter": 13, "Escape": 27}


def main(argv):
    if len(argv) < 3:
        print("usage: cdp.py PORT goto URL | eval EXPR | wait SECONDS EXPR | shot FILE | key KEY",
              file=sys.stderr)
        return 2
    c = page(int(argv[1]))
    what = argv[2]
    if what == "goto":
        c.call("Page.navigate", url=argv[3])
    elif what == "eval":
        print(json.dumps(evaluate(c, argv[3])))
    elif what == "wait":
        until = time.monotonic() + float(argv[3])
        last = None
        while time.monotonic() < until:
            try:
                last = evaluate(c, argv[4])
            except RuntimeError as e:
                last = str(e)
            else:
                if last:
                    print(json.dumps(last))
                    return 0
            time.sleep(0.2)
        print(json.dumps(last))
        return 1
    elif what == "shot":
        r = c.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        with open(argv[3], "wb") as f:
            f.write(base64.b64decode(r["data"]))
    elif what == "key":
        code = KEYS.get(argv[3], 0)
        for t in ("rawKeyDown", "keyUp"):
            c.call("Input.dispatchKeyEvent", type=t, key=argv[3], code=argv[3],
                   windowsVirtualKeyCode=code)
        if argv[3] == "Enter":
            c.call("Input.dispatchKeyEvent", type="char", text="\r")
    else:
        print(f"cdp.py: unknown command {what}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
