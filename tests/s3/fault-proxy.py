#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A fault-injecting HTTP proxy on 127.0.0.1 in front of the tests' S3 server.

Usage: fault-proxy.py UPSTREAM_PORT CONTROL_FILE PORT_FILE

Listens on a free port of 127.0.0.1 (written to PORT_FILE once it listens) and forwards every
request unchanged (the Host header too, so SigV4 signatures still verify) to 127.0.0.1:UPSTREAM_PORT.
CONTROL_FILE, read at each request, holds "KIND COUNT [PATH [METHOD]]": the next COUNT requests (whose
path starts with PATH, and whose method is METHOD, when given) get the fault instead of being
forwarded, and COUNT is decremented:
    503     HTTP 503 SlowDown (S3's XML error)
    500     HTTP 500 InternalError
    reset   the connection is closed without an answer
    junk    HTTP 200 whose body is no S3 answer, without an ETag header
    error200  HTTP 200 with the XML error InternalError as its body (S3 may answer a
            CompleteMultipartUpload so)
    badlist:KEY  HTTP 200 with a ListBucketResult holding the one object KEY, whatever prefix
            was asked for (a store that answers a LIST with keys outside the prefix)
  and these forward the request and spoil the answer:
    cut     the answer's head with its true Content-Length, then half its body, then the
            connection is closed (a server or proxy that dies mid-answer)
    longlen the whole body under a Content-Length 100 bytes larger, then the connection is closed
    shortlen  the whole body under a Content-Length 100 bytes smaller (the rest is left on the
            connection, kept alive, where the next answer is read)
    slow:S  the request forwarded (and done), its answer sent S seconds later (a server that
            stalls after the work: a PUT retried then finds its own object there)
    hold:S  the request held S seconds, then forwarded if its client is still connected (a slow
            link: a client killed meanwhile never reaches the server)
    wait:FILE  the request held until FILE exists (at most 300 s), then forwarded: a pause point
            that the test ends when what it runs inside the window is done
    skew:S  every time the server states (Date, Last-Modified and Object Lock retain-until
            headers, <LastModified> in listings, <RetainUntilDate>) moved by S seconds: a server
            whose clock is S seconds off this machine's (the times a request states are signed,
            and pass unmoved)
A missing or empty file forwards everything. Each fault served is appended to CONTROL_FILE.log.
"""
import email.utils
import http.client
import os
import http.server
import re
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

UPSTREAM = int(sys.argv[1])
CONTROL = sys.argv[2]
lock = threading.Lock()

ERRORS = {
    "503": (503, "SlowDown", "Please reduce your request rate."),
    "500": (500, "InternalError", "We encountered an internal error. Please try again."),
}


def error_xml(code, msg):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{msg}</Message></Error>").encode()


def canned(fault):
    """The status and body a fault answers with instead of forwarding, or None."""
    if fault in ERRORS:
        status, code, msg = ERRORS[fault]
        return status, error_xml(code, msg)
    if fault == "junk":
        return 200, b"<NotAnS3Answer/>"
    if fault == "error200":
        return 200, error_xml(*ERRORS["500"][1:])
    if fault and fault.startswith("badlist:"):
        return 200, (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Contents><Key>{fault[8:]}</Key>'
                     "<Size>1</Size><ETag>\"x\"</ETag></Contents><IsTruncated>false</IsTruncated>"
                     "</ListBucketResult>").encode()
    return None


def take_fault(path, method):
    """The fault for this request, or None; decrements the control file's count."""
    with lock:
        try:
            with open(CONTROL) as f:
                words = f.read().split()
        except FileNotFoundError:
            return None
        if len(words) not in (2, 3, 4) or int(words[1]) <= 0:
            return None
        if len(words) >= 3 and not path.startswith(words[2]):
            return None
        if len(words) == 4 and method != words[3]:
            return None
        with open(CONTROL, "w") as f:
            f.write(f"{words[0]} {int(words[1]) - 1} {' '.join(words[2:])}\n")
        with open(CONTROL + ".log", "a") as f:
            f.write(words[0] + "\n")
        return words[0]


def skew_header(value, seconds):
    t = email.utils.parsedate_to_datetime(value)
    return email.utils.format_datetime(t + timedelta(seconds=seconds), usegmt=True)


def skew_iso(value, seconds):
    t = datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return (t + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def skew_body(data, seconds):
    def moved(m):
        return m.group(1) + skew_iso(m.group(2).decode(), seconds).encode() + m.group(3)
    return re.sub(rb"(<LastModified>|<RetainUntilDate>)([^<]*)(</LastModified>|</RetainUntilDate>)", moved, data)


def client_gone(sock):
    """Whether the client closed its end (a killed process's socket reads as the end)."""
    import socket
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = take_fault(self.path, self.command)
        if fault == "reset":
            self.close_connection = True
            self.connection.close()
            return
        answer = canned(fault)
        if answer:
            status, xml = answer
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(xml)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(xml)
            return
        if fault and fault.startswith("wait:"):
            for _ in range(3000):
                if os.path.exists(fault[5:]):
                    break
                time.sleep(0.1)
        if fault and fault.startswith("hold:"):
            time.sleep(float(fault[5:]))
            if client_gone(self.connection):
                self.close_connection = True
                return
        skew = int(fault[5:]) if fault and fault.startswith("skew:") else 0
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before it read the body (a 412 to If-None-Match): read below
        resp = conn.getresponse()
        data = resp.read()
        if fault and fault.startswith("slow:"):
            time.sleep(float(fault[5:]))
        if skew:
            data = skew_body(data, skew)
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if skew and k.lower() in ("date", "last-modified"):
                v = skew_header(v, skew)
            elif skew and k.lower() == "x-amz-object-lock-retain-until-date":
                v = skew_iso(v, skew)
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        if skew and not resp.getheader("Date"):
            self.send_header("Date", skew_header(email.utils.formatdate(usegmt=True), skew))
        length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
        if fault == "longlen" and self.command != "HEAD":
            length = str(len(data) + 100)
        elif fault == "shortlen" and self.command != "HEAD":
            length = str(max(len(data) - 100, 0))
        self.send_header("Content-Length", length or "0")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data[: len(data) // 2] if fault == "cut" else data)
        if fault in ("cut", "longlen"):
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
server.serve_forever()
