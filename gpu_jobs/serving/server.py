"""The OpenAI-compatible HTTP surface of one serving process (Starlette, run by uvicorn).

Routes: ``GET /health`` (503 until the model is loaded), ``GET /v1/models``, ``POST /v1/completions``,
``POST /v1/chat/completions`` (plain JSON or server-sent events). Every response carries ``usage``; a stream
always ends with a chunk whose ``choices`` is empty and whose ``usage`` is set, then ``data: [DONE]``. Once
ready, /health also reports the prefix cache's counters (hits, misses, bytes held; engine/prefix.py).
Every route, /health included, needs the replica's credential (gpu_jobs.serving.auth); without it: 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gpu_jobs.serving.auth import RequireCredential
from gpu_jobs.serving.chat_template import render_chat
from gpu_jobs.serving.engine import Delta, Engine, Failed, Finished, Job, Sequence
from gpu_jobs.serving.protocol import ApiError, ParsedRequest, SamplingParams, parse_chat, parse_completion

# Chat requests without max_tokens get the room left in the context window, capped here: a CPU generating
# thousands of tokens for one forgotten parameter would hold a slot for minutes.
CHAT_DEFAULT_MAX_TOKENS = 512
DISCONNECT_POLL_S = 1.0


def _error(error: ApiError) -> JSONResponse:
    headers = {"Retry-After": "1"} if error.status == 429 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


class Server:
    def __init__(self, engine: Engine, served_name: str) -> None:
        self.engine = engine
        self.served_name = served_name

    # -- routes ----------------------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok", "tier": self.engine.config.tier, "model": self.served_name}
        if self.engine.load_error:
            return JSONResponse(
                {**body, "status": "failed", "error": self.engine.load_error}, status_code=503
            )
        if not self.engine.ready.is_set():
            return JSONResponse({**body, "status": "loading"}, status_code=503)
        body["requests_held"] = self.engine.held
        if self.engine.prefix_cache is not None:  # hits, misses, bytes held (engine/prefix.py)
            body["prefix_cache"] = self.engine.prefix_cache.stats()
        return JSONResponse(body)

    async def models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.served_name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "anneal",
                        "max_model_len": self.engine.context_len or None,
                        "tier": self.engine.config.tier,
                    }
                ],
            }
        )

    async def chat_completions(self, request: Request) -> Response:
        return await self._complete(request, "chat")

    async def completions(self, request: Request) -> Response:
        return await self._complete(request, "completion")

    # -- the shared path -------------------------------------------------------------------------------
    async def _complete(self, request: Request, kind: str) -> Response:
        try:
            body = await self._body(request)
            parsed = parse_chat(body) if kind == "chat" else parse_completion(body)
            self._check_ready()
            sequences, prompt_tokens = self._sequences(parsed)
            self.engine.admit()
        except ApiError as error:
            return _error(error)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Delta | Finished | Failed] = asyncio.Queue()
        job = Job(sequences=sequences, emit=lambda event: loop.call_soon_threadsafe(events.put_nowait, event))
        self.engine.submit(job)
        meta = {
            "id": ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex,
            "created": int(time.time()),
            "model": self.served_name,
        }
        if parsed.stream:
            return StreamingResponse(
                self._stream(kind, meta, job, events, len(sequences), prompt_tokens),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            return await self._collect(request, kind, meta, events, len(sequences), prompt_tokens)
        finally:
            job.cancelled.set()
            self.engine.release()

    async def _body(self, request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            raise ApiError("the request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError("the request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise ApiError("'model' is required: the name of the served model", param="model")
        if model != self.served_name:
            # Names neither the model served nor the one asked for: the caller already knows its own.
            raise ApiError(
                "the model named in 'model' is not served here",
                status=404,
                param="model",
                code="model_not_found",
            )
        return body

    def _check_ready(self) -> None:
        if self.engine.load_error:
            raise ApiError(
                f"the model failed to load: {self.engine.load_error}", status=503, type="server_error"
            )
        if not self.engine.ready.is_set():
            raise ApiError("the model is still loading; retry shortly", status=503, type="server_error")

    def _sequences(self, parsed: ParsedRequest) -> tuple[list[Sequence], int]:
        tokenizer = self.engine.tokenizer
        context = self.engine.context_len
        vocab = len(tokenizer)
        if parsed.kind == "chat":
            text = render_chat(tokenizer, parsed.messages)
            # The template writes any special tokens itself.
            prompts = [tokenizer(text, add_special_tokens=False)["input_ids"]]
            where = "messages"
        else:
            prompts = []
            for i, prompt in enumerate(parsed.prompts):
                if isinstance(prompt, str):
                    prompts.append(tokenizer(prompt)["input_ids"])
                else:
                    bad = [t for t in prompt if not 0 <= t < vocab]
                    if bad:
                        raise ApiError(
                            f"prompt {i} holds token ids outside the vocabulary (0..{vocab - 1}): {bad[:5]}",
                            param="prompt",
                        )
                    prompts.append(list(prompt))
            where = "prompt"
        longest = max(len(p) for p in prompts)
        if longest == 0:
            raise ApiError("the prompt is empty", param=where)
        if longest >= context:
            raise ApiError(
                f"the prompt is {longest} tokens; this model's context window is {context} tokens",
                param=where,
                code="context_length_exceeded",
            )
        max_tokens = parsed.max_tokens
        if max_tokens is None:
            max_tokens = min(context - longest, CHAT_DEFAULT_MAX_TOKENS)
        elif longest + max_tokens > context:
            raise ApiError(
                f"this model's context window is {context} tokens; the prompt ({longest} tokens) plus "
                f"max_tokens ({max_tokens}) is {longest + max_tokens}: lower max_tokens to at most "
                f"{context - longest} or shorten the prompt",
                param="max_tokens",
                code="context_length_exceeded",
            )
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=parsed.temperature,
            top_p=parsed.top_p,
            stop=parsed.stop,
            seed=parsed.seed,
            ignore_eos=parsed.ignore_eos,
        )
        sequences = [
            Sequence(index=p * parsed.n + j, prompt_ids=ids, params=params)
            for p, ids in enumerate(prompts)
            for j in range(parsed.n)
        ]
        prompt_tokens = sum(len(ids) for ids in prompts)
        return sequences, prompt_tokens

    @staticmethod
    def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    async def _collect(
        self, request: Request, kind: str, meta: dict, events: asyncio.Queue, count: int, prompt_tokens: int
    ) -> Response:
        texts = [""] * count
        finished: dict[int, Finished] = {}
        while len(finished) < count:
            try:
                event = await asyncio.wait_for(events.get(), timeout=DISCONNECT_POLL_S)
            except TimeoutError:
                # A client that hung up gets nothing: stop generating for it (the caller cancels the job).
                if await request.is_disconnected():
                    return Response(status_code=499)
                continue
            if isinstance(event, Failed):
                return _error(ApiError(event.message, status=500, type="server_error"))
            if isinstance(event, Delta):
                texts[event.index] += event.text
            else:
                finished[event.index] = event
        completion_tokens = sum(f.completion_tokens for f in finished.values())
        if kind == "chat":
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": texts[i]},
                    "finish_reason": finished[i].finish_reason,
                    "logprobs": None,
                }
                for i in range(count)
            ]
            obj = "chat.completion"
        else:
            choices = [
                {"index": i, "text": texts[i], "finish_reason": finished[i].finish_reason, "logprobs": None}
                for i in range(count)
            ]
            obj = "text_completion"
        return JSONResponse(
            {
                **{"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"]},
                "choices": choices,
                "usage": self._usage(prompt_tokens, completion_tokens),
            }
        )

    async def _stream(
        self, kind: str, meta: dict, job: Job, events: asyncio.Queue, count: int, prompt_tokens: int
    ) -> AsyncIterator[str]:
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"

        def chunk(choices: list[dict], **extra: Any) -> str:
            payload = {"id": meta["id"], "object": obj, "created": meta["created"], "model": meta["model"]}
            return f"data: {json.dumps({**payload, 'choices': choices, **extra})}\n\n"

        def choice(index: int, text: str | None, finish_reason: str | None = None) -> dict:
            if kind == "chat":
                delta = {} if text is None else {"content": text}
                return {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return {"index": index, "text": text or "", "finish_reason": finish_reason, "logprobs": None}

        try:
            if kind == "chat":
                for i in range(count):
                    yield chunk(
                        [
                            {
                                "index": i,
                                "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None,
                                "logprobs": None,
                            }
                        ]
                    )
            done = 0
            completion_tokens = 0
            while done < count:
                event = await events.get()
                if isinstance(event, Failed):
                    error = ApiError(event.message, status=500, type="server_error")
                    yield f"data: {json.dumps(error.body())}\n\n"
                    break
                if isinstance(event, Delta):
                    yield chunk([choice(event.index, event.text)])
                else:
                    done += 1
                    completion_tokens += event.completion_tokens
                    yield chunk([choice(event.index, None, event.finish_reason)])
            yield chunk([], usage=self._usage(prompt_tokens, completion_tokens))
            yield "data: [DONE]\n\n"
        finally:
            # Also reached when the client goes away mid-stream: the worker stops at its next token.
            job.cancelled.set()
            self.engine.release()


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    if status == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = (
            f"no route {request.method} {request.url.path}; see /v1/models, /v1/completions, "
            "/v1/chat/completions"
        )
    return _error(ApiError(message, status=status, code="not_found" if status == 404 else None))


async def _server_error(request: Request, exc: Exception) -> Response:
    return _error(ApiError(f"internal error: {type(exc).__name__}", status=500, type="server_error"))


def create_app(engine: Engine, served_name: str, *, credential: str) -> Starlette:
    """The replica's app; every request must send ``Authorization: Bearer <credential>``."""
    server = Server(engine, served_name)
    routes = [
        Route("/health", server.health, methods=["GET"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/chat/completions", server.chat_completions, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _not_found, Exception: _server_error},
        middleware=[Middleware(RequireCredential, credential=credential)],
        lifespan=_lifespan(engine),
    )


def _lifespan(engine: Engine) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine.start()
        yield
        engine.stop()

    return lifespan
