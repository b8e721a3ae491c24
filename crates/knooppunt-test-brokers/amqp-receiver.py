"""An AMQP 1.0 receiver for the tests (Apache Qpid Proton, Debian's python3-qpid-proton).

Usage: amqp-receiver.py PORT ADDRESS USER PASSWORD

Attaches a receiving link to ADDRESS on 127.0.0.1:PORT (SASL PLAIN), accepts every
message, and connects again when the broker goes away. Prints `ready` each time it is
attached, then one JSON line per message: its content-type, application properties (name,
AMQP type, value), body (hex; one data section) and durable flag.
"""

import json
import sys
import time

from proton import symbol
from proton.utils import BlockingConnection
from proton._exceptions import Timeout

port, address, user, password = sys.argv[1:5]


def kind(value):
    if isinstance(value, bool):
        return "bool", value
    if isinstance(value, int):
        return "long", value
    if isinstance(value, symbol):
        return "symbol", str(value)
    if isinstance(value, str):
        return "string", value
    return type(value).__name__, str(value)


def show(m):
    body = m.body
    if isinstance(body, memoryview):
        body = bytes(body)
    if isinstance(body, str):
        body = body.encode()
    properties = [[name, *kind(value)] for name, value in (m.properties or {}).items()]
    print(
        json.dumps(
            {
                "content_type": str(m.content_type) if m.content_type else None,
                "application_properties": properties,
                "body": bytes(body or b"").hex(),
                "durable": bool(m.durable),
            }
        ),
        flush=True,
    )


while True:
    try:
        connection = BlockingConnection(
            f"amqp://127.0.0.1:{port}",
            user=user,
            password=password,
            allowed_mechs="PLAIN",
            timeout=10,
        )
        receiver = connection.create_receiver(address, credit=100)
        print("ready", flush=True)
        while True:
            try:
                message = receiver.receive(timeout=1)
            except Timeout:
                continue
            show(message)
            receiver.accept()
    except Exception:
        time.sleep(0.2)
