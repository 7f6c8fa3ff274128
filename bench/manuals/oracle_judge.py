#!/usr/bin/env python3
"""Grounding on the manuals with the LLM judge on, served by an *oracle* on loopback.

Usage::

    .venv/bin/python bench/manuals/oracle_judge.py [--db PATH] [--json]

tether's real OpenAI client talks HTTP to a small server on 127.0.0.1 that speaks the
chat-completions protocol. The server is an oracle, not a model: it reads the question
from the judge's prompt, looks it up in ``questions.json`` and answers
``{"answerable": true, "passages": [...]}`` exactly when a passage it was shown holds
the question's answer snippet (compared NFKC-folded, case-folded, without whitespace, as
``check_questions.py`` does), else ``{"answerable": false}``. Unanswerable and
cross-scope questions have no snippet in scope, so it always says no to them.

So the number it prints is an upper bound for the pipeline with a judge: what a judge
that never misreads would make of what retrieval put in front of it
(``rag.judge_candidates`` passages). Whatever falls short of 1.0 is retrieval's: an
answer page that was not among the passages shown. A real model's number is lower, and
is for you to measure with your model in ``[llm]``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_QUESTION = re.compile(r"^Question: (.*?)\n\nPassages:\n\n", re.S)
_PASSAGE = re.compile(r"^\[(\d+)\] ", re.M)


def fold(text: str) -> str:
    """NFKC, case-folded, no whitespace, no line-end hyphen breaks."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"\s+", "", text.replace("-\n", ""))


class Oracle:
    """The judge's answers, from the question set's answer snippets."""

    def __init__(self, questions: list[dict[str, Any]]) -> None:
        self.answers = {
            q["question"]: fold(q["answer"]) for q in questions if q["kind"] == "answerable"
        }
        self.calls = 0

    def reply(self, prompt: str) -> str:
        self.calls += 1
        match = _QUESTION.match(prompt)
        answer = self.answers.get(match.group(1)) if match else None
        if not match or answer is None:
            return json.dumps({"answerable": False, "passages": []})
        body = prompt[match.end() :]
        starts = list(_PASSAGE.finditer(body))
        holding = [
            int(m.group(1))
            for m, end in zip(starts, [*(s.start() for s in starts[1:]), len(body)], strict=True)
            if answer in fold(body[m.end() : end])
        ]
        return json.dumps({"answerable": bool(holding), "passages": holding})


def serve(oracle: Oracle) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            content = oracle.reply(body["messages"][-1]["content"])
            data = json.dumps({
                "id": f"chatcmpl-{oracle.calls}", "object": "chat.completion", "created": 0,
                "model": body.get("model", "oracle"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=":memory:", help="store to index into and reuse")
    parser.add_argument("--json", action="store_true", help="print the whole report")
    args = parser.parse_args(argv)

    from tether import Settings
    from tether.eval.documents import grounding_on_documents, load_questions

    questions = HERE / "questions.json"
    oracle = Oracle(load_questions(questions)["questions"])
    server = serve(oracle)
    try:
        host, port = server.server_address[:2]
        settings = Settings.load(
            llm={"base_url": f"http://{host}:{port}/v1", "api_key": "oracle", "model": "oracle",
                 "timeout": 10.0, "max_retries": 0},
            rag={"enable_llm_judge": True},
        )  # fmt: skip
        report = grounding_on_documents(questions, HERE / "pdfs", db=args.db, settings=settings)
    finally:
        server.shutdown()
    data = report.to_dict()
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(f"oracle judge, {oracle.calls} verdicts")
        for name in ("balanced_accuracy", "answer_page_in_context", "hit_at_1"):
            print(f"{name}: {data[name]:.4f}")
        for kind, rate in data["rates"].items():
            print(f"right on {kind}: {rate:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
