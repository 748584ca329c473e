"""What Google's own SDK (`google-genai`) makes of each Gemini recording: the oracle of what a
stream adds up to, written to `sdk_oracle.json` (read by `test_google_wire.py`).

    python -m venv /tmp/genai && /tmp/genai/bin/pip install google-genai==3.6.1
    /tmp/genai/bin/python tests/providers/google_wire/sdk_oracle.py

Each recording (`pi_wire/recordings/*.gemini.sse`, `*.vertex.sse`) is served to the SDK's own
client (`generate_content_stream`, the Gemini API or Vertex AI express mode) through an
`httpx2.MockTransport`; the SDK parses the server-sent events into `GenerateContentResponse`
chunks, and this script sums them up: the thought text and the answer text (the parts' text,
by their `thought` flag), the function calls (id, name, args, thought signature), the last
signature of the text and thought parts, the finish reason, the last usage, the prompt's block
reason, the first response id, and the SDK's error if it raised one. It imports nothing of
agentloop.
"""

from __future__ import annotations

import base64
import importlib
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
RECORDINGS = HERE.parent / "pi_wire" / "recordings"
OUT = HERE / "sdk_oracle.json"


def _signature(value: Any) -> str | None:
    return base64.b64encode(value).decode() if isinstance(value, bytes) and value else None


def summary(chunks: list[Any], error: str | None) -> dict[str, Any]:
    """What a stream of `GenerateContentResponse` chunks adds up to."""
    out: dict[str, Any] = {
        "thinking": "",
        "text": "",
        "calls": [],
        "thinking_signature": None,
        "text_signature": None,
        "finish_reason": None,
        "usage": None,
        "block_reason": None,
        "response_id": None,
        "error": error,
    }
    for chunk in chunks:
        if out["response_id"] is None and chunk.response_id:
            out["response_id"] = chunk.response_id
        if chunk.prompt_feedback is not None and chunk.prompt_feedback.block_reason is not None:
            out["block_reason"] = str(chunk.prompt_feedback.block_reason.value)
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None:
            for part in (candidate.content.parts if candidate.content else None) or []:
                signature = _signature(part.thought_signature)
                if part.text is not None:
                    kind = "thinking" if part.thought else "text"
                    out[kind] += part.text
                    if signature:
                        out[f"{kind}_signature"] = signature
                if part.function_call is not None:
                    call = part.function_call
                    out["calls"].append(
                        {"id": call.id, "name": call.name, "args": call.args or {}, "signature": signature}
                    )
            if candidate.finish_reason is not None:
                reason = candidate.finish_reason
                out["finish_reason"] = reason if isinstance(reason, str) else str(reason.value)
        if chunk.usage_metadata is not None:
            usage = chunk.usage_metadata
            out["usage"] = {
                "prompt": usage.prompt_token_count or 0,
                "candidates": usage.candidates_token_count or 0,
                "thoughts": usage.thoughts_token_count or 0,
                "cached": usage.cached_content_token_count or 0,
                "total": usage.total_token_count or 0,
            }
    return out


def replay(path: Path) -> dict[str, Any]:
    httpx = importlib.import_module("httpx2")  # the HTTP client google-genai 3.x sends with
    genai = importlib.import_module("google.genai")
    types = importlib.import_module("google.genai.types")
    body = path.read_bytes()
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
    )
    vertex = path.name.endswith(".vertex.sse")
    options = types.HttpOptions(base_url="http://replay", httpx_client=httpx.Client(transport=transport))
    client = genai.Client(api_key="k-replay", vertexai=vertex, http_options=options)
    chunks: list[Any] = []
    error = None
    try:
        for chunk in client.models.generate_content_stream(model="replay", contents="hello"):
            chunks.append(chunk)
    except Exception as exc:  # the SDK's verdict on a broken stream is part of the oracle
        error = f"{type(exc).__name__}: {exc}"
    return summary(chunks, error)


def main() -> None:
    version = importlib.import_module("google.genai.version").__version__
    paths = [p for p in sorted(RECORDINGS.glob("*.sse")) if p.name.endswith((".gemini.sse", ".vertex.sse"))]
    results = {path.name: replay(path) for path in paths}
    OUT.write_text(json.dumps({"google-genai": version, "recordings": results}, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(results)} recordings through google-genai {version} -> {OUT}")


if __name__ == "__main__":
    main()
