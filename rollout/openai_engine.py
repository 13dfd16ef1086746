"""A frozen policy behind an OpenAI-compatible ``/v1/completions`` endpoint (a vLLM server, an API).

For EvoOnly runs: nothing is trained, so there are no weights to sync. Prompts arrive as token
ids already rendered with the chat template; they are decoded back to text (every server takes
text) and sent to the plain completions endpoint, so the server applies no second template. The
returned text is re-tokenised with the run's tokenizer for the archive's completion lengths,
unless a choice carries its own ``token_ids`` (vLLM >= 0.10.2 adds them when a request has
``return_token_ids``; this engine does not send that field, which stricter servers reject).
Per-token logprobs are not requested (their tokens need not match ours, and nothing trains).

Each request has a timeout; connection errors, timeouts, 429 and 5xx are retried with
exponential backoff, other HTTP errors fail at once with the server's message.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from rollout.engine_api import Completion, OnBatch, SamplingParams, Weights, parse_stop, register_engine

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint did not answer usefully; the message names the URL and what happened."""


@register_engine("openai")
class OpenAIEngine:
    needs_sync = False  # a frozen policy

    def __init__(self, tokenizer, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 120.0,
                 max_retries: int = 4, stop: tuple[str, ...] = (), seeded: bool = True, concurrency: int = 8,
                 backoff_s: float = 0.5):
        if tokenizer is None:
            raise ValueError("the openai engine needs the run's tokenizer (prompts arrive as token ids)")
        self.tokenizer = tokenizer
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.stop = tuple(stop)
        self.seeded = seeded
        self.concurrency = concurrency
        self.backoff_s = backoff_s

    @classmethod
    def from_config(cls, rollout, tokenizer=None, model_name: str = "", **_):
        r = rollout
        return cls(tokenizer, r.openai_base_url, r.openai_model or model_name,
                   api_key=os.environ.get(r.openai_api_key_env) or None, timeout_s=r.openai_timeout_s,
                   max_retries=r.openai_max_retries, stop=parse_stop(r.stop), seeded=r.seeded)

    def sync_weights(self, weights: Weights) -> None:
        raise RuntimeError("rollout.engine=openai serves a frozen policy: there are no weights to sync "
                           "(run it with trainer.enabled=false)")

    def _post(self, body: dict) -> dict:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 30.0))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:500].decode(errors="replace")
                last = f"HTTP {exc.code}: {detail}"
                if exc.code not in RETRY_STATUSES:
                    raise EndpointError(f"POST {self.url} failed: {last}") from None
            except (TimeoutError, socket.timeout) as exc:
                last = f"timed out after {self.timeout_s:g} s ({exc})"
            except urllib.error.URLError as exc:
                reason = exc.reason
                last = (f"timed out after {self.timeout_s:g} s" if isinstance(reason, (TimeoutError, socket.timeout))
                        else f"connection failed: {reason}")
            except json.JSONDecodeError as exc:
                raise EndpointError(f"POST {self.url}: the response is not JSON ({exc})") from None
        raise EndpointError(f"POST {self.url} failed after {self.max_retries + 1} attempt(s); last: {last}")

    def _one(self, prompt: list[int], params: SamplingParams, index: int, stop: tuple[str, ...]) -> list[Completion]:
        body = {"model": self.model, "prompt": self.tokenizer.decode(prompt, skip_special_tokens=False),
                "n": params.n, "temperature": params.temperature, "top_p": params.top_p,
                "max_tokens": params.max_new_tokens}
        if stop:
            body["stop"] = list(stop)
        if self.seeded and params.seed is not None:
            body["seed"] = params.seed + index * params.n  # servers seed choice j with seed + j (as vLLM does)
        reply = self._post(body)
        choices = sorted(reply.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != params.n:
            raise EndpointError(f"POST {self.url}: asked for n={params.n} completions, got {len(choices)}")
        out = []
        for choice in choices:
            text = choice.get("text") or ""
            ids = choice.get("token_ids")  # when the server sends them (see the module docstring)
            if not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(Completion(ids, text, choice.get("finish_reason") == "length"))
        return out

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 on_batch: OnBatch | None = None) -> list[list[Completion]]:
        stop = self.stop if params.stop is None else tuple(params.stop)
        grouped: list[list[Completion]] = []
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(prompts)))) as pool:
            for group in pool.map(lambda item: self._one(item[1], params, item[0], stop), enumerate(prompts)):
                if on_batch is not None:  # each prompt is its own request: hand groups on in order as they land
                    on_batch(len(grouped), [group])
                grouped.append(group)
        return grouped
