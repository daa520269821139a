"""The shared set of trajectory pairs (expected calls, actual calls) that evalrun's matcher is
compared on against agentevals (tests/test_trajectory_agreement.py) and DeepEval
(tests/test_trajectory_deepeval.py): hand-picked edges, then pairs generated from a fixed seed
(docs/agents.md, "Agreement with agentevals")."""

from __future__ import annotations

import random
from typing import Any

from evalrun.transcripts.trajectory import Call

TOOLS = ("search", "read", "write")


def _args(rng: random.Random) -> dict[str, Any]:
    keys = rng.sample(["q", "k", "n"], rng.randint(0, 2))
    return {key: rng.choice([1, 2]) for key in keys}


def _perturb(rng: random.Random, calls: list[Call]) -> list[Call]:
    """A related trajectory: shuffled, shortened, lengthened, renamed or with other args."""
    out = list(calls)
    for _ in range(rng.randint(0, 2)):
        edit = rng.choice(["shuffle", "drop", "add", "rename", "args", "trim_args"])
        if edit == "shuffle":
            rng.shuffle(out)
        elif edit == "drop" and out:
            out.pop(rng.randrange(len(out)))
        elif edit == "add":
            out.insert(rng.randint(0, len(out)), Call(rng.choice(TOOLS), _args(rng)))
        elif edit == "rename" and out:
            i = rng.randrange(len(out))
            out[i] = Call(rng.choice(TOOLS), out[i].arguments)
        elif edit == "args" and out:
            i = rng.randrange(len(out))
            out[i] = Call(out[i].name, _args(rng))
        elif edit == "trim_args" and out:
            i = rng.randrange(len(out))
            kept = dict(list(out[i].arguments.items())[:1])
            out[i] = Call(out[i].name, kept)
    return out


#: Hand-picked edges first: empty trajectories, a repeated tool, the same calls reordered, an
#: extra and a missing call, arguments wider or narrower than expected.
EDGES: list[tuple[list[Call], list[Call]]] = [
    ([], []),
    ([], [Call("search", {"q": 1})]),
    ([Call("search", {"q": 1})], []),
    ([Call("read", {"k": 1})] * 3, [Call("read", {"k": 1})] * 3),
    ([Call("read", {"k": 1})] * 2, [Call("read", {"k": 1})] * 3),
    ([Call("read", {"k": 1}), Call("write", {})], [Call("write", {}), Call("read", {"k": 1})]),
    ([Call("read", {"k": 1})], [Call("read", {"k": 1, "n": 2})]),
    ([Call("read", {"k": 1, "n": 2})], [Call("read", {"k": 1})]),
    ([Call("read", {"k": 1})], [Call("read", {"k": 2})]),
    ([Call("read", {}), Call("search", {"q": 2})], [Call("search", {"q": 2})]),
]


def pairs(count: int, seed: int = 35) -> list[tuple[list[Call], list[Call]]]:
    rng = random.Random(seed)
    out = list(EDGES)
    for _ in range(count - len(EDGES)):
        expected = [Call(rng.choice(TOOLS), _args(rng)) for _ in range(rng.randint(0, 4))]
        out.append((expected, _perturb(rng, expected)))
    return out


PAIRS = pairs(400)
