"""A real Server-Sent Events client for the /v1/stream tests: httpx with httpx-sse.

Usage: sse_client.py URL COUNT [LAST_EVENT_ID]

Connects to URL (with the Last-Event-ID header when given), prints `connected` once
the response headers arrived (status 200, text/event-stream), then one JSON line per
event ({"id", "event", "data"}, data parsed as JSON) and exits 0 after COUNT events.
A 503 (every stream place taken: a stream whose client just left frees its place
when the server notices) is retried for up to 10 s, as an EventSource retries. Any
other answer or a stream that ends early exits 1 with the reason on stderr.
"""

import json
import sys
import time

import httpx
from httpx_sse import connect_sse


def main() -> int:
    url, count = sys.argv[1], int(sys.argv[2])
    headers = {}
    if len(sys.argv) > 3:
        headers["Last-Event-ID"] = sys.argv[3]
    seen = 0
    # No read timeout: the stream is idle between transitions (keep-alive comments
    # arrive meanwhile); the test bounds the whole run.
    deadline = time.monotonic() + 10
    with httpx.Client(timeout=httpx.Timeout(10.0, read=None)) as client:
        while True:
            with connect_sse(client, "GET", url, headers=headers) as source:
                if source.response.status_code == 503 and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                source.response.raise_for_status()
                print("connected", flush=True)
                for sse in source.iter_sse():
                    data = json.loads(sse.data)
                    print(json.dumps({"id": sse.id, "event": sse.event, "data": data}), flush=True)
                    seen += 1
                    if seen == count:
                        return 0
                break
    print(f"the stream ended after {seen} of {count} events", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
