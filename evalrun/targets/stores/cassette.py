"""Record/replay cassettes: a JSONL file with one line per target call.

Each line is ``{"key", "target", "request", "response"}``. On replay, calls with the same key
get the recorded responses in recorded order (the last one repeats), so a request asked several
times at temperature > 0 replays its different answers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from evalrun.errors import ConfigError
from evalrun.targets.base import CompletionRequest, CompletionResponse
from evalrun.targets.config import TargetConfig
from evalrun.targets.stores.format import cassette_key, response_from_json, response_to_json


class Cassette:
    def __init__(
        self,
        path: Path,
        *,
        writer: IO[str] | None = None,
        recorded: dict[str, list[CompletionResponse]] | None = None,
    ) -> None:
        self.path = path
        self._writer = writer
        self._recorded = recorded or {}
        self._cursor: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_recording(cls, path: Path) -> Cassette:
        """Append to ``path`` (created with its folder); every line is flushed at once."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            writer = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write the cassette {path}: {exc.strerror or exc}") from None
        return cls(path, writer=writer)

    @classmethod
    def for_replay(cls, path: Path) -> Cassette:
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise ConfigError(f"replay cassette not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the cassette {path}: {exc}") from None
        recorded: dict[str, list[CompletionResponse]] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                recorded.setdefault(str(entry["key"]), []).append(
                    response_from_json(entry["response"])
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                if number == len(lines):
                    break  # a last line cut short by a crash while recording
                raise ConfigError(f"{path}:{number}: not a cassette entry") from None
        return cls(path, recorded=recorded)

    def __len__(self) -> int:
        return sum(len(responses) for responses in self._recorded.values())

    def get(self, config: TargetConfig, request: CompletionRequest) -> CompletionResponse | None:
        key = cassette_key(config, request)
        with self._lock:
            responses = self._recorded.get(key)
            if not responses:
                return None
            index = self._cursor.get(key, 0)
            self._cursor[key] = index + 1
            return _copy(responses[min(index, len(responses) - 1)])

    def put(
        self, config: TargetConfig, request: CompletionRequest, response: CompletionResponse
    ) -> None:
        if self._writer is None:
            raise RuntimeError(f"cassette {self.path} is not open for recording")
        entry: dict[str, Any] = {
            "key": cassette_key(config, request),
            "target": config.name,
            "request": asdict(request),
            "response": response_to_json(response),
        }
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self._writer.write(line)
            self._writer.flush()

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


def _copy(response: CompletionResponse) -> CompletionResponse:
    return response_from_json(response_to_json(response))
