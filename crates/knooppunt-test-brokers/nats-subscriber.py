"""A NATS subscriber for the tests (nats-py, NATS's own Python client).

Usage: nats-subscriber.py PORT USER PASSWORD SUBJECT [STREAM] [--tls CA] [--count]

Without STREAM: a core NATS subscription on SUBJECT. With STREAM: makes a JetStream stream
of that name (file storage) taking SUBJECT, and reads it with a durable consumer, each
message acknowledged, so that what the stream stored while the subscriber or the server
was away still comes.

Prints `ready` once subscribed, then one JSON line per message: its subject, headers (name
and value, as received) and payload (hex). With --count (core NATS only), prints instead
the number of messages received so far, every 10 ms while it changes.
"""

import asyncio
import json
import ssl
import sys

import nats


async def main():
    args = sys.argv[1:]
    counting = "--count" in args
    if counting:
        args.remove("--count")
    tls = None
    if "--tls" in args:
        i = args.index("--tls")
        tls = ssl.create_default_context(cafile=args[i + 1])
        del args[i : i + 2]
    port, user, password, subject = args[:4]
    stream = args[4] if len(args) > 4 else None
    scheme = "tls" if tls else "nats"
    nc = await nats.connect(
        f"{scheme}://127.0.0.1:{port}",
        user=user,
        password=password,
        tls=tls,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.2,
    )

    async def show(msg):
        print(
            json.dumps(
                {
                    "subject": msg.subject,
                    "headers": sorted((msg.headers or {}).items()),
                    "payload": msg.data.hex(),
                }
            ),
            flush=True,
        )

    if counting:
        received = 0

        async def count(msg):
            nonlocal received
            received += 1

        await nc.subscribe(subject, cb=count, pending_msgs_limit=10_000_000, pending_bytes_limit=1 << 34)
        await nc.flush()
        print("ready", flush=True)
        shown = 0
        while True:
            await asyncio.sleep(0.01)
            if received != shown:
                shown = received
                print(shown, flush=True)
    if stream is None:
        await nc.subscribe(subject, cb=show)
        await nc.flush()
        print("ready", flush=True)
        while True:
            await asyncio.sleep(3600)
    js = nc.jetstream()
    await js.add_stream(name=stream, subjects=[subject])
    sub = await js.pull_subscribe(subject, durable="tests")
    print("ready", flush=True)
    while True:
        try:
            msgs = await sub.fetch(64, timeout=0.5)
        except Exception:
            continue
        for msg in msgs:
            await show(msg)
            await msg.ack()


asyncio.run(main())
