"""evalrun's grader SDK: talk to the judge proxy and speak the grader protocol (stdlib only).

from grader_sdk import GraderInput, GraderResult, TargetClient, judge_relevance, script_grader

@script_grader
def grade(inp: GraderInput) -> GraderResult:
    verdicts = judge_relevance(TargetClient.from_env(), inp.question, inp.retrieval_context())
    ...
"""

from grader_sdk._client import (
    AsyncTargetClient,
    InvokeRequest,
    InvokeResult,
    ProxyInfo,
    TargetClient,
    proxy_settings,
)
from grader_sdk._context import configured_context, message_text, node_text
from grader_sdk._errors import (
    BadRequest,
    BudgetExceeded,
    JudgeReplyError,
    PayloadTooLarge,
    ProtocolError,
    ProxyError,
    ProxyNotConfigured,
    ProxyUnavailable,
    ShuttingDown,
    Unauthorized,
    UnknownTarget,
    UnsupportedRequest,
    UpstreamError,
    UpstreamTimeout,
)
from grader_sdk._grader import (
    PROTOCOL,
    Abstain,
    GraderInput,
    GraderResult,
    run_grader,
    script_grader,
    serve_grader,
)
from grader_sdk._judge import (
    Verdict,
    aextract_statements,
    ajudge_attribution,
    ajudge_relevance,
    extract_statements,
    judge_attribution,
    judge_relevance,
    judge_replies,
    read_result,
)
from grader_sdk.replies import Reading, parse_json_reply

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL",
    "Abstain",
    "AsyncTargetClient",
    "BadRequest",
    "BudgetExceeded",
    "GraderInput",
    "GraderResult",
    "InvokeRequest",
    "InvokeResult",
    "JudgeReplyError",
    "PayloadTooLarge",
    "ProtocolError",
    "ProxyError",
    "ProxyInfo",
    "ProxyNotConfigured",
    "ProxyUnavailable",
    "Reading",
    "ShuttingDown",
    "TargetClient",
    "Unauthorized",
    "UnknownTarget",
    "UnsupportedRequest",
    "UpstreamError",
    "UpstreamTimeout",
    "Verdict",
    "aextract_statements",
    "ajudge_attribution",
    "ajudge_relevance",
    "configured_context",
    "extract_statements",
    "judge_attribution",
    "judge_relevance",
    "judge_replies",
    "message_text",
    "node_text",
    "parse_json_reply",
    "proxy_settings",
    "read_result",
    "run_grader",
    "script_grader",
    "serve_grader",
]
