#!/usr/bin/env python3
# The requests of scripts/walk. Setup (two sessions, each with a feed and a counted impression),
# one warm-up of each traced kind, then the trace windows, each opened and closed by the `enable`
# and `disable` commands of perf record's control FIFO (perf acknowledges each), their times
# (CLOCK_MONOTONIC, perf's clock with -k) written down:
#   1. POST /v1/events: one click, which must be accepted;
#   2. GET /v1/reports/ads/{ad_id} with the admin token, which must answer 200;
#   3. no request at all, as long as the longest of the two (the control: what runs anyway).
# Every request goes over one keep-alive connection opened before the warm-up, so a window holds
# the request and what it causes, not the connection's accept or close. A window stays open
# WALK_SETTLE_SECONDS after the answer arrived, for the work that follows it (the access log line
# is written 20 ms later on a queue of its own).
# Usage: drive.py PORT TOKEN CONTROL_FIFO ACK_FIFO OUTPUT_JSON
import datetime
import errno
import json
import os
import socket
import sys
import time
import uuid

port, token, control_path, ack_path, output = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
settle = float(os.environ.get("WALK_SETTLE_SECONDS", "1"))
answer_wait = 60.0
ad = "ad-walk"
admin = {"Authorization": "Bearer " + token}
json_type = {"Content-Type": "application/json"}


def now(offset=0.0):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Connection:
    """HTTP/1.1 over one keep-alive TCP connection. Each request leaves in one write, head and body
    together, so that it arrives whole (http.client writes a body apart from its head, which the
    server may then read in a turn of its own)."""

    def __init__(self):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=answer_wait)
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def close(self):
        self.socket.close()

    def receive(self):
        data = self.socket.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def take(self, count):
        while len(self.buffer) < count:
            self.receive()
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def line(self):
        while b"\r\n" not in self.buffer:
            self.receive()
        data, _, self.buffer = self.buffer.partition(b"\r\n")
        return data

    def request(self, method, path, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        head = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1:%d" % port]
        head += ["%s: %s" % item for item in (headers or {}).items()]
        if body is not None:
            head.append("Content-Length: %d" % len(data))
        self.socket.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        status = int(self.line().split()[1])
        fields = {}
        while True:
            line = self.line()
            if not line:
                break
            name, _, value = line.decode("latin-1").partition(":")
            fields[name.strip().lower()] = value.strip()
        if fields.get("transfer-encoding", "").lower() == "chunked":
            answer = b""
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    break
                answer += self.take(size)
                self.take(2)
        else:
            answer = self.take(int(fields.get("content-length", "0")))
        return status, answer


def request(connection, method, path, body=None, headers=None, expect=(200, 201)):
    status, data = connection.request(method, path, body, headers)
    if status not in expect:
        sys.exit("walk: %s %s answered %d: %s" % (method, path, status, data[:300]))
    return data


def once(method, path, body=None, headers=None):
    connection = Connection()
    try:
        return request(connection, method, path, body, headers)
    finally:
        connection.close()


def event(session, kind, **fields):
    body = {"event_id": str(uuid.uuid4()), "type": kind, "session_id": session, "ad_id": ad, "occurred_at": now()}
    body.update(fields)
    return body


def accepted(data):
    answer = json.loads(data)
    if answer.get("accepted") != 1:
        sys.exit("walk: the click was not accepted: %s" % data[:300])


# Setup: the warm-up and the traced click each have their session, so that both take the same path
# (a session's first click, after its counted impression, on an ad of its current feed).
for session in ("walk-warm", "walk-traced"):
    once("PUT", "/v1/sessions/%s/feed" % session, {"snapshot_id": "f-" + session, "ads": [
        {"ad_id": ad, "position": 3, "advertiser_id": "walk-advertiser", "url": "https://walk.example/"}]},
         dict(admin, **json_type))
    accepted(once("POST", "/v1/events", event(session, "impression", visible_fraction=0.9, visible_ms=1500), json_type))

connection = Connection()
click = lambda session: event(session, "click", snapshot_id="f-" + session, position=3)
kinds = [
    ("event", "POST /v1/events (one click, accepted)",
     lambda session: accepted(request(connection, "POST", "/v1/events", click(session), json_type))),
    ("report", "GET /v1/reports/ads/%s" % ad,
     lambda session: json.loads(request(connection, "GET", "/v1/reports/ads/" + ad, headers=admin))),
]
for _, _, send in kinds:
    send("walk-warm")
time.sleep(0.5)

# perf opens its ends of the FIFOs as it starts; a FIFO opened for writing before that has no reader.
deadline = time.monotonic() + 60
while True:
    try:
        control = os.open(control_path, os.O_WRONLY | os.O_NONBLOCK)
        break
    except OSError as error:
        if error.errno != errno.ENXIO or time.monotonic() > deadline:
            sys.exit("walk: perf did not open its control FIFO (perf.log says why)")
        time.sleep(0.1)
os.set_blocking(control, True)
ack = os.open(ack_path, os.O_RDONLY)


def command(word):
    os.write(control, (word + "\n").encode())
    answer = os.read(ack, 64)
    if not answer.startswith(b"ack"):
        sys.exit("walk: perf answered %r to %s (perf.log says why)" % (answer, word))


windows = []
for number, (key, label, send) in enumerate(kinds, start=1):
    opened = time.monotonic()
    command("enable")
    started = time.monotonic()
    send("walk-traced")
    answered = time.monotonic() - started
    time.sleep(settle)
    command("disable")
    windows.append({"window": number, "key": key, "label": label, "answered_seconds": round(answered, 4),
                    "opened": opened, "closed": time.monotonic()})
    print("walk: %s answered in %.1f ms while traced" % (label, answered * 1000), file=sys.stderr)

# The control: a window as long as the longest, with no request.
quiet = max(w["closed"] - w["opened"] for w in windows)
opened = time.monotonic()
command("enable")
time.sleep(quiet)
command("disable")
windows.append({"window": len(windows) + 1, "key": "control", "label": "no request (control)", "answered_seconds": None,
                "opened": opened, "closed": time.monotonic()})
connection.close()
with open(output, "w") as out:
    json.dump(windows, out, indent=1)
