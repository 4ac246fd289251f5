"""A loopback OpenAI-compatible server that fails on request, for the model layer's fault tests.

Unlike ``tests/agent/fake_openai_server.py`` (one happy script for paper-qa), this one is run
in-process on a free ``127.0.0.1`` port and told, request by request, how to misbehave: hang past
the client's timeout, answer 429 with ``Retry-After``, answer 5xx, send a body that is not JSON,
send a completion whose content is cut-off JSON, or drop the connection halfway through the body.
Real sockets (not a mocked transport) are the point: what is tested is how litellm's HTTP stack
and our error mapping meet real network failures.

Every request is recorded (path, headers, JSON body), so a test counts the attempts that
actually reached the server. Faults are queued with :meth:`FaultServer.script`; when the queue is
empty, ``route`` picks the fault from the request (so one question of a batch can fail while the
others are answered), and without a route the ``default`` fault plays every time.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Fault", "FaultServer", "Recorded", "completion_body", "running_fault_server"]

# {"kind": K, …}: ok (content, finish_reason, top_logprobs) · hang (seconds) · status (code, headers, message,
# echo_key) · bad_json · drop
Fault = dict[str, Any]
Route = Callable[[dict[str, Any]], Fault]


def completion_body(
    content: str, *, model: str = "test-model", finish_reason: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]


@dataclass
class FaultServer:
    """The state a test drives: queued faults, the default one, and what was received."""

    default: Fault = field(default_factory=lambda: {"kind": "ok", "content": "ok"})
    route: Route | None = None
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0
    _queue: deque[Fault] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # set at shutdown, so a handler hanging "forever" lets the server thread go
    released: threading.Event = field(default_factory=threading.Event)

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def attempts(self) -> int:
        with self._lock:
            return len(self.requests)

    def script(self, *faults: Fault) -> None:
        """Queue faults for the next requests, in order; afterwards ``default`` applies."""
        with self._lock:
            self._queue.extend(faults)

    def _next(self, recorded: Recorded) -> Fault:
        with self._lock:
            self.requests.append(recorded)
            if self._queue:
                return self._queue.popleft()
        return self.route(recorded.body) if self.route is not None else self.default


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers do: a drop must be noticed mid-body

    def log_message(self, *args: object) -> None:  # quiet
        return

    def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        self._raw(status, json.dumps(body).encode(), headers)

    def _raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        headers = {name.lower(): value for name, value in self.headers.items()}
        fault = state._next(Recorded(self.path, headers, body))
        kind = fault["kind"]
        if kind == "ok":
            content = str(fault.get("content", "ok"))
            body = completion_body(content, finish_reason=fault.get("finish_reason", "stop"))
            if "top_logprobs" in fault:  # {token: logprob} for the first token, as OpenAI sends them
                top = [{"token": t, "logprob": lp, "bytes": None} for t, lp in fault["top_logprobs"].items()]
                first = {**top[0], "top_logprobs": top}
                body["choices"][0]["logprobs"] = {"content": [first]}
            self._json(200, body)
        elif kind == "hang":
            # longer than any client timeout in the tests; shutdown releases it early
            state.released.wait(fault.get("seconds", 30.0))
            self.close_connection = True
        elif kind == "status":
            code = int(fault["code"])
            message = fault.get("message", f"fault {code}")
            if fault.get("echo_key"):
                # as careless servers and proxies do: the credential, in full, in the error
                sent = self.headers.get("Authorization", "").removeprefix("Bearer ")
                message = f"Incorrect API key provided: {sent or self.headers.get('x-api-key', '')}"
            error = {"error": {"message": message, "type": "server_error"}}
            self._json(code, error, fault.get("headers"))
        elif kind == "bad_json":
            self._raw(200, b'{"id": "chatcmpl-fault", "object": "chat.completion", "choices": [{"ind')
        elif kind == "drop":
            # promise a full body, send part of it, then hang up
            data = json.dumps(completion_body("this reply never arrives whole")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 3])
            self.wfile.flush()
            self.close_connection = True
        else:  # a typo in a test should fail loudly, not look like a server fault
            raise ValueError(f"unknown fault {kind!r}")

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: FaultServer) -> None:
        self.state = state
        super().__init__(("127.0.0.1", 0), _Handler)


@contextmanager
def running_fault_server(default: Fault | None = None, route: Route | None = None) -> Iterator[FaultServer]:
    """Serve on a free loopback port in a background thread for the block's duration."""
    state = FaultServer(default=default or {"kind": "ok", "content": "ok"}, route=route)
    server = _Server(state)
    state.port = server.server_address[1]
    # a short poll interval: shutdown() waits up to one interval, once per test
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="fault-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
