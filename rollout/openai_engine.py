"""A frozen policy behind an OpenAI-compatible ``/v1/completions`` endpoint (a vLLM server, an API).

For EvoOnly runs: nothing is trained, so there are no weights to sync. Prompts arrive as token
ids already rendered with the chat template; they are decoded back to text (every server takes
text) and sent to the plain completions endpoint, so the server applies no second template. The
returned text is re-tokenised with the run's tokenizer for the archive's completion lengths,
unless a choice carries its own ``token_ids`` (vLLM >= 0.10.2 adds them when a request has
``return_token_ids``; this engine does not send that field, which stricter servers reject).
Per-token logprobs are not requested (their tokens need not match ours, and nothing trains).

Responses are streamed (``"stream": true``, server-sent events), so ``timeout_s`` bounds how long
the server may stay silent, not how long a completion may take: a slow server that keeps sending
tokens never times out, and a request is resent only when the server sent nothing for
``timeout_s`` (stalled or gone), never because its answer is long. A server that ignores
``stream`` and answers with one JSON body is read as such. Connection errors, silences, 429 and 5xx
are retried with exponential backoff; other HTTP errors fail at once with the server's message.

Before a run loads or writes anything, ``preflight`` asks the endpoint for its models
(``GET {base_url}/models``, ``CHECK_TIMEOUT_S``): an unreachable server, a rejected key or a model
the server does not serve is one line naming the URL, and an empty ``openai.model`` becomes the
server's model when it serves exactly one.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from rollout.engine_api import Completion, OnBatch, SamplingParams, Weights, parse_stop, register_engine

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}
CHECK_TIMEOUT_S = 5.0  # the endpoint check before a run: an answer to GET /models is immediate
NO_SERVER_HINT = "; start one (.venv/bin/python scripts/serve.py RUN_DIR) or set rollout.openai.base_url"


class EndpointError(RuntimeError):
    """The endpoint did not answer usefully; the message names the URL and what happened."""


def _models_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/models"


def served_models(base_url: str, api_key: str | None = None, timeout_s: float = CHECK_TIMEOUT_S) -> list[str] | None:
    """The model ids ``GET {base_url}/models`` lists; None when the server has no such route (404).
    Anything else that is not a list of models raises EndpointError naming the URL."""
    url = _models_url(base_url)
    if not base_url.startswith(("http://", "https://")):
        raise EndpointError(f"rollout.openai.base_url = {base_url!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        detail = " ".join(exc.read()[:200].decode(errors="replace").split())
        hint = " (check the API key in the variable rollout.openai.api_key_env names)" if exc.code in (401, 403) else ""
        raise EndpointError(f"GET {url} answered HTTP {exc.code}{hint}: {detail}") from None
    except (TimeoutError, socket.timeout):
        raise EndpointError(f"GET {url}: no answer within {timeout_s:g} s") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        what = f"no answer within {timeout_s:g} s" if isinstance(reason, (TimeoutError, socket.timeout)) else reason
        raise EndpointError(f"no server at {base_url} (GET {url}: {what}){NO_SERVER_HINT}") from None
    except (http.client.HTTPException, OSError) as exc:
        raise EndpointError(f"no server at {base_url} (GET {url}: {exc!r}){NO_SERVER_HINT}") from None
    except json.JSONDecodeError:
        raise EndpointError(f"GET {url}: the answer is not JSON; is {base_url} an OpenAI-compatible /v1 endpoint?") from None
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list):
        raise EndpointError(f"GET {url}: the answer has no model list; is {base_url} an OpenAI-compatible /v1 endpoint?")
    return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id") is not None]


def resolve_model(base_url: str, configured: str, fallback: str, served: list[str] | None) -> str:
    """The model name to request: ``configured`` (rollout.openai.model) when the server serves it;
    when it is empty, the server's only model, else ``fallback`` (model.policy) if served."""
    url = _models_url(base_url)
    if served is None:  # the server cannot list its models: trust the configuration
        return configured or fallback
    listed = ", ".join(repr(m) for m in served) or "none"
    if configured:
        if configured not in served:
            raise EndpointError(f"{url} does not serve rollout.openai.model = {configured!r}; it serves {listed}")
        return configured
    if len(served) == 1:
        return served[0]
    if fallback in served:
        return fallback
    raise EndpointError(f"{url} serves {listed}: set rollout.openai.model to the one to sample from")


@register_engine("openai")
class OpenAIEngine:
    needs_sync = False  # a frozen policy
    needs_weights = False  # the server holds the policy: the loop loads only the tokenizer, exports nothing

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
        return cls(tokenizer, r.openai.base_url, r.openai.model or model_name,
                   api_key=os.environ.get(r.openai.api_key_env) or None, timeout_s=r.openai.timeout_s,
                   max_retries=r.openai.max_retries, stop=parse_stop(r.stop), seeded=r.seeded)

    @classmethod
    def preflight(cls, rollout, model_name: str = "", **_) -> None:
        """Check the endpoint before the run loads or writes anything; pin ``rollout.openai.model`` to
        the served model it resolves (see ``resolve_model``). Raises EndpointError (one line)."""
        api_key = os.environ.get(rollout.openai.api_key_env) or None
        served = served_models(rollout.openai.base_url, api_key)
        rollout.openai.model = resolve_model(rollout.openai.base_url, rollout.openai.model, model_name, served)

    def sync_weights(self, weights: Weights) -> None:
        raise RuntimeError("rollout.engine=openai serves a frozen policy: there are no weights to sync "
                           "(run it with trainer.enabled=false)")

    def _read_stream(self, response) -> list[dict]:
        """The choices of a streamed (server-sent events) completion, each chunk's text joined in
        order. Every line must arrive within ``timeout_s`` (the socket's timeout): a silence, not a
        long answer, times out."""
        choices: dict[int, dict] = {}
        done = False
        for raw in response:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue  # blank separators, comments (": keep-alive"), event names
            payload = line[len("data:"):].strip()
            if payload == "[DONE]":
                done = True
                break
            event = json.loads(payload)
            if isinstance(event, dict) and event.get("error"):
                error = event["error"]
                raise EndpointError(f"POST {self.url}: the server failed mid-stream: "
                                    f"{error.get('message', error) if isinstance(error, dict) else error}")
            for chunk in event.get("choices") or []:
                slot = choices.setdefault(chunk.get("index", 0), {"index": chunk.get("index", 0), "text": [],
                                                                  "token_ids": [], "finish_reason": None})
                slot["text"].append(chunk.get("text") or "")
                ids = chunk.get("token_ids")
                if slot["token_ids"] is not None and isinstance(ids, list):
                    slot["token_ids"].extend(ids)
                elif chunk.get("text"):  # text without ids: re-tokenise the whole choice
                    slot["token_ids"] = None
                if chunk.get("finish_reason"):
                    slot["finish_reason"] = chunk["finish_reason"]
        if not done and not (choices and all(c["finish_reason"] for c in choices.values())):
            raise ConnectionError("the stream ended before its last chunk")
        return [dict(c, text="".join(c["text"]), token_ids=c["token_ids"] or None) for c in choices.values()]

    def _post(self, body: dict) -> dict:
        """POST a completion request (streamed) and return ``{"choices": [...]}``, retrying as the
        module docstring says."""
        data = json.dumps(dict(body, stream=True)).encode()
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 30.0))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    if response.headers.get_content_type() == "text/event-stream":
                        return {"choices": self._read_stream(response)}
                    return json.loads(response.read())  # a server that does not stream
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:500].decode(errors="replace")
                last = f"HTTP {exc.code}: {detail}"
                if exc.code not in RETRY_STATUSES:
                    raise EndpointError(f"POST {self.url} failed: {last}") from None
            except (TimeoutError, socket.timeout):
                last = f"timed out after {self.timeout_s:g} s without a byte from the server"
            except urllib.error.URLError as exc:
                reason = exc.reason
                last = (f"timed out after {self.timeout_s:g} s without a byte from the server"
                        if isinstance(reason, (TimeoutError, socket.timeout)) else f"connection failed: {reason}")
            except json.JSONDecodeError as exc:
                raise EndpointError(f"POST {self.url}: the response is not JSON ({exc})") from None
            except (http.client.HTTPException, OSError) as exc:  # dropped mid-response
                last = f"connection failed: {exc!r}"
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
