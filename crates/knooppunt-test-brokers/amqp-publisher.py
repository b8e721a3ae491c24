"""An AMQP 1.0 publisher for the benchmarks (Apache Qpid Proton): the baseline the hub's
AMQP deliveries are measured against.

Usage: amqp-publisher.py PORT ADDRESS USER PASSWORD COUNT SIZE

Sends COUNT durable messages of SIZE bytes to ADDRESS, unsettled, as fast as the broker's
credit allows, and prints `done` when the broker has accepted every one.
"""

import sys

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

port, address, user, password, count, size = sys.argv[1:7]
count, size = int(count), int(size)


class Publisher(MessagingHandler):
    def __init__(self):
        super().__init__()
        self.sent = 0
        self.accepted = 0
        self.body = b"x" * size

    def on_start(self, event):
        conn = event.container.connect(
            f"amqp://127.0.0.1:{port}", user=user, password=password, allowed_mechs="PLAIN"
        )
        event.container.create_sender(conn, address)

    def on_sendable(self, event):
        while event.sender.credit and self.sent < count:
            event.sender.send(Message(body=self.body, durable=True))
            self.sent += 1

    def on_accepted(self, event):
        self.accepted += 1
        if self.accepted == count:
            print("done", flush=True)
            event.connection.close()

    def on_rejected(self, event):
        print("rejected", flush=True)
        event.connection.close()


Container(Publisher()).run()
