"""A loopback stand-in for llama.cpp's OpenAI-compatible server, for the paper-qa wiring tests.

Run as ``python fake_openai_server.py PORT CALL_LOG``. It answers ``/v1/models`` and
``/v1/chat/completions`` deterministically: a paper-qa summary request (its JSON summary prompt)
gets a relevance score that is high only for the EGFR passage, and an answer
request gets prose naming the option letter whose text is "Osimertinib", or admits it cannot
answer. Each request is appended to ``CALL_LOG``, so a test can count the calls paper-qa made.
"""

from __future__ import annotations

import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def reply_for(messages: list[dict[str, str]]) -> str:
    text = "\n".join(str(m.get("content", "")) for m in messages)
    if "relevance_score" in text:
        if "remains active against tumours" in text:  # the EGFR passage itself, not the options
            return json.dumps({"summary": "The passage reports osimertinib activity.", "relevance_score": 9})
        return json.dumps({"summary": "The passage is unrelated to the question.", "relevance_score": 1})
    match = re.search(r"([A-Z])\) Osimertinib", text)
    if match and "osimertinib activity" in text.lower():
        return f"The answer is {match.group(1)}: osimertinib remains active against T790M."
    return "I cannot answer this question due to insufficient information."


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # quiet
        return

    def _send(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "local-gguf", "object": "model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        content = reply_for(body.get("messages", []))
        with Path(sys.argv[2]).open("a") as fh:
            fh.write(json.dumps({"path": self.path}) + "\n")
        self._send(
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "local-gguf"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }
        )


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
