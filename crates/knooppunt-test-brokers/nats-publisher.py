"""A NATS publisher for the benchmarks (nats-py, NATS's own Python client): the baseline
the hub's NATS deliveries are measured against.

Usage: nats-publisher.py PORT USER PASSWORD SUBJECT COUNT SIZE [--jetstream]

Publishes COUNT messages of SIZE bytes to SUBJECT: core NATS (then one flush), or
JetStream with up to 256 publishes awaiting their acknowledgement at a time (the hub's
bound per connection). Prints `done` when every message was flushed or acknowledged.
"""

import asyncio
import sys

import nats


async def main():
    port, user, password, subject, count, size = sys.argv[1:7]
    count, size = int(count), int(size)
    jetstream = "--jetstream" in sys.argv
    nc = await nats.connect(f"nats://127.0.0.1:{port}", user=user, password=password)
    payload = b"x" * size
    if jetstream:
        js = nc.jetstream()
        window = asyncio.Semaphore(256)

        async def one():
            async with window:
                await js.publish(subject, payload)

        await asyncio.gather(*(one() for _ in range(count)))
    else:
        for _ in range(count):
            await nc.publish(subject, payload)
        await nc.flush()
    print("done", flush=True)
    await nc.close()


asyncio.run(main())
