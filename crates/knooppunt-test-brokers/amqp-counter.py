"""An AMQP 1.0 receiver for the benchmarks (Apache Qpid Proton) that only counts.

Usage: amqp-counter.py PORT ADDRESS USER PASSWORD

Receives from ADDRESS with a window of 1,000 messages, accepting each, and prints `ready`
once attached, then the number of messages received so far every 10 ms while it changes.
"""

import sys

from proton.handlers import MessagingHandler
from proton.reactor import Container

port, address, user, password = sys.argv[1:5]


class Counter(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=1000, auto_accept=True)
        self.received = 0
        self.shown = 0

    def on_start(self, event):
        conn = event.container.connect(
            f"amqp://127.0.0.1:{port}", user=user, password=password, allowed_mechs="PLAIN"
        )
        event.container.create_receiver(conn, address)
        event.container.schedule(0.01, self)

    def on_link_opened(self, event):
        if event.receiver:
            print("ready", flush=True)

    def on_message(self, event):
        self.received += 1

    def on_timer_task(self, event):
        if self.received != self.shown:
            self.shown = self.received
            print(self.shown, flush=True)
        event.container.schedule(0.01, self)


Container(Counter()).run()
