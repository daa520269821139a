"""The ``mock`` target: scripted, deterministic answers for tests, demos and offline CI."""

from __future__ import annotations

import asyncio
import re

from evalrun.errors import ConfigError
from evalrun.targets.base import CompletionRequest, CompletionResponse, TokenUsage
from evalrun.targets.config import TargetConfig

#: A prompt that asks to answer yes or no: "Answer yes or no.", "Reply with 'yes' or 'no'",
#: "respond yes/no" (docs/targets.md, "mock").
YES_NO_QUESTION = re.compile(
    r"\b(?:answer|reply|respond)\b[^.?!\n]{0,40}?\byes\W{0,3}(?:or|/)\W{0,3}no\b", re.IGNORECASE
)


class MockTarget:
    """First matching rule wins: a regex searched in system prompt + prompt, or a task kind;
    then ``yes_no`` for a free-text yes/no question; then ``default``."""

    kind = "mock"

    def __init__(self, config: TargetConfig, api_key: str | None = None) -> None:
        self.name = config.name
        self.config = config
        self._rules: list[tuple[re.Pattern[str] | None, str | None, str]] = []
        for i, rule in enumerate(config.rules):
            if rule.match is None and rule.task is None:
                raise ConfigError(f"target '{config.name}': rule {i + 1} needs 'match' or 'task'")
            try:
                pattern = re.compile(rule.match, re.DOTALL) if rule.match is not None else None
            except re.error as exc:
                raise ConfigError(
                    f"target '{config.name}': rule {i + 1} has an invalid regex: {exc}"
                ) from None
            self._rules.append((pattern, rule.task, rule.response))

    def answer(self, request: CompletionRequest) -> str:
        text = request.prompt_text
        kind = (request.task or {}).get("kind")
        for pattern, task, response in self._rules:
            if task is not None and task != kind:
                continue
            if pattern is not None and not pattern.search(text):
                continue
            return response
        if self.config.yes_no is not None and kind is None and YES_NO_QUESTION.search(text):
            return self.config.yes_no
        return self.config.default if self.config.default is not None else ""

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        if self.config.latency_ms:
            await asyncio.sleep(self.config.latency_ms / 1000)
        text = self.answer(request)
        usage = TokenUsage(len(request.prompt_text.split()), len(text.split()))
        return CompletionResponse(text=text, usage=usage, finish_reason="stop", model="mock")

    async def aclose(self) -> None:
        return None
