"""An AMQP 1.0 receiver for the tests (Apache Qpid Proton, Debian's python3-qpid-proton).

Usage: amqp-receiver.py PORT ADDRESS USER PASSWORD

Attaches a receiving link to ADDRESS on 127.0.0.1:PORT (SASL PLAIN), accepts every
message, and reconnects when the broker goes away. Prints `ready` once attached, then one
JSON line per message: its content-type, application properties (name, AMQP type, value),
body (hex; one data section) and durable flag.
"""

import json
import sys

from proton import symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container

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


class Receiver(MessagingHandler):
    def __init__(self):
        super().__init__(auto_accept=True)

    def on_start(self, event):
        conn = event.container.connect(
            f"amqp://127.0.0.1:{port}",
            user=user,
            password=password,
            allowed_mechs="PLAIN",
            reconnect=[0.2] * 10000,
        )
        event.container.create_receiver(conn, address)

    def on_link_opened(self, event):
        if event.receiver:
            print("ready", flush=True)

    def on_message(self, event):
        m = event.message
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


Container(Receiver()).run()
