"""An example webhook for Knooppunt: it consents to deliveries and prints every event.

Run it with `python3 config/example-subscriber.py` (Python 3.8 or newer, nothing to
install). It listens on port 9000 of every interface, or on the port in the PORT
environment variable (0: any free port, printed at start). It answers the hub's validation request (OPTIONS with
WebHook-Request-Origin) with WebHook-Allowed-Origin: *, which is its consent, and prints
each delivered event: the JSON body in structured mode, or the ce- headers and the body in
binary mode. It answers 204, so every event is delivered once.

For trying the hub only: it accepts events from anyone and does not check a token.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Subscriber(BaseHTTPRequestHandler):
    def do_OPTIONS(self):
        origin = self.headers.get("WebHook-Request-Origin", "?")
        print(f"validation request from {origin}: consent given", flush=True)
        self.send_response(200)
        self.send_header("WebHook-Allowed-Origin", "*")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        content_type = self.headers.get("Content-Type", "")
        if content_type.startswith("application/cloudevents+json"):
            event = json.loads(body)
            print(f"event {event.get('type')} {event.get('id')}: {body.decode()}", flush=True)
        else:
            attributes = {
                name[3:]: value
                for name, value in self.headers.items()
                if name.lower().startswith("ce-")
            }
            print(
                f"event {attributes.get('type')} {attributes.get('id')} (binary mode): "
                f"{json.dumps(attributes)} {content_type} {body.decode(errors='replace')}",
                flush=True,
            )
        self.send_response(204)
        self.end_headers()

    def log_message(self, format, *args):
        pass  # Only the events above are printed.


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "9000"))
    server = ThreadingHTTPServer(("0.0.0.0", port), Subscriber)
    print(f"example subscriber listening on port {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)
