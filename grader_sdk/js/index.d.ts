// Types for @evalrun/grader-sdk (index.mjs).

export declare const PROTOCOL: 'evalrun.grader/1';
export declare const EXIT_OK: 0;
export declare const EXIT_ERROR: 1;
export declare const EXIT_ABSTAIN: 3;

// --- errors ----------------------------------------------------------------------------------

export interface ErrorBody {
  code?: string;
  message?: string;
  [key: string]: unknown;
}

export declare class ProxyError extends Error {
  constructor(message: string, init?: { status?: number | null; code?: string | null; body?: ErrorBody });
  status: number | null;
  code: string | null;
  body: ErrorBody;
}
export declare class ProxyNotConfigured extends ProxyError {}
export declare class ProxyUnavailable extends ProxyError {}
export declare class ProtocolError extends ProxyError {}
export declare class Unauthorized extends ProxyError {}
export declare class BudgetExceeded extends ProxyError {
  readonly limit: number | null;
  readonly used: number | null;
  readonly requested: number | null;
}
export declare class UnknownTarget extends ProxyError {
  readonly allowed: string[];
}
export declare class BadRequest extends ProxyError {}
export declare class PayloadTooLarge extends ProxyError {}
export declare class UnsupportedRequest extends ProxyError {}
export declare class UpstreamError extends ProxyError {}
export declare class UpstreamTimeout extends UpstreamError {}
export declare class ShuttingDown extends ProxyError {}

export declare class JudgeReplyError extends Error {
  constructor(message: string, raw?: string);
  raw: string;
}

/** Throw to abstain: exit 3, the case is unscored. */
export declare class Abstain extends Error {
  constructor(reason: string, details?: unknown);
  reason: string;
  details: unknown;
}

export declare function errorFromResponse(status: number, payload: unknown, fallbackText?: string): ProxyError;

// --- client ----------------------------------------------------------------------------------

export type Task =
  | { kind: 'relevance'; query: string; passage: string; siblings?: string[] }
  | { kind: 'attribution'; statement: string; context: string[] }
  | { kind: 'statements'; text: string }
  | { kind: 'similarity'; output: string; expected: string }
  | { kind: string; [key: string]: unknown };

export interface InvokeRequest {
  question: string;
  systemPrompt?: string;
  target?: string;
  temperature?: number;
  maxTokens?: number;
  responseFormat?: Record<string, unknown>;
  task?: Task;
}

export interface TokenUsage {
  input: number;
  output: number;
  total: number;
}

export interface InvokeResult {
  output: Array<{ role: 'assistant'; content: string }>;
  rawText: string;
  tokenUsage: TokenUsage | Record<string, never>;
  target: string;
  cached: boolean;
  latencyMs: number;
  /** stop | length | tool_calls | content_filter; null from a proxy that does not say. */
  finishReason: 'stop' | 'length' | 'tool_calls' | 'content_filter' | null;
  /** The provider's refusal message, when it declined instead of answering. */
  refusal: string | null;
}

export interface ProxyInfo {
  targetName: string;
  callCount: number;
  maxCalls: number;
  availableTargets: string[];
  /** Budget units one request to the default target costs (a judge panel: one per member). */
  callsPerRequest: number;
  /** Requests to the default target the budget still pays for. */
  remaining: number;
}

export interface ClientOptions {
  url?: string;
  token?: string;
  timeoutMs?: number;
}

export declare class TargetClient {
  constructor(options: { url: string; token: string; timeoutMs?: number });
  readonly url: string;
  invoke(request: InvokeRequest | string, extra?: Omit<InvokeRequest, 'question'>): Promise<InvokeResult>;
  invokeBatch(requests: Iterable<InvokeRequest | string>): Promise<InvokeResult[]>;
  getInfo(): Promise<ProxyInfo>;
  info(): Promise<ProxyInfo>;
}

/** A client for the proxy in AGENTV_TARGET_PROXY_URL/TOKEN (or EVALRUN_PROXY_URL/TOKEN). */
export declare function createTargetClient(options?: ClientOptions): TargetClient;
export declare function proxySettings(env?: Record<string, string | undefined>): { url: string; token: string };

// --- grader input / result -------------------------------------------------------------------

export interface ToolCall {
  tool: string;
  input: unknown;
  output: unknown;
  id?: string;
  [key: string]: unknown;
}

export interface Message {
  role: string;
  content: unknown;
  tool_calls: ToolCall[];
  /** camelCase view of tool_calls (same array). */
  readonly toolCalls: ToolCall[];
  [key: string]: unknown;
}

export interface ToolCallResults {
  tool: string;
  query: string | null;
  results: string[];
}

export interface GraderInput {
  protocol: string;
  case_id: string;
  question: string;
  criteria: string | null;
  input: Message[];
  output: string | null;
  messages: Message[];
  expected_output: Message[];
  reference_answer: string | null;
  config: Record<string, any>;
  metadata: Record<string, any>;
  grader: { name?: string; max_calls?: number; [key: string]: unknown };
  attempt: number;
  // camelCase views
  readonly caseId: string;
  readonly expectedOutput: Message[];
  readonly referenceAnswer: string | null;
  readonly maxCalls: number | null;
  readonly raw: Record<string, unknown>;
  /** config.retrieval_context, else every expected tool call's results, flattened in order. */
  retrievalContext(): string[];
  retrieval_context(): string[];
  /** Each expected tool call as {tool, query, results} (config.tools limits which count). */
  toolCallResults(): ToolCallResults[];
  tool_call_results(): ToolCallResults[];
  /** criteria, else the reference answer, else null. */
  expectedText(): string | null;
  expected_text(): string | null;
}

export interface Check {
  text: string;
  pass: boolean;
  score?: number;
  reason?: string;
}

export interface GraderResult {
  score?: number;
  pass?: boolean;
  reason?: string;
  hits?: string[];
  misses?: string[];
  checks?: Check[];
  details?: unknown;
}

export type GraderFn = (input: GraderInput) => GraderResult | number | boolean | Promise<GraderResult | number | boolean>;

/** Reads stdin, runs fn, prints the JSON result, sets the exit code (0/1/3); resolves to it. */
export declare function defineScriptGrader(fn: GraderFn): Promise<number>;
export declare function runScriptGrader(fn: GraderFn): Promise<number>;
/** Stream mode: one case per stdin line ({nonce, payload, env}), one {nonce, exit, result} line per case. */
export declare function serveScriptGrader(fn: GraderFn): Promise<number>;
export declare const MODE_ENV: 'EVALRUN_GRADER_MODE';
export declare const SERVE: 'serve';
export declare function toGraderInput(payload: Record<string, unknown>): GraderInput;
export declare function coerceResult(value: unknown): GraderResult;

export declare function messageText(message: { content?: unknown }): string;
export declare function nodeText(item: unknown): string | null;
export declare function resultsOf(output: unknown): string[];
export declare function toolCallResults(messages: Message[], tools?: string[] | null): ToolCallResults[];
export declare function configuredContext(value: unknown): string[] | null;

// --- judge helpers ---------------------------------------------------------------------------

export interface Verdict {
  /** null when the judge's reply could not be read, even after a retry (reason says why). */
  ok: boolean | null;
  reason: string;
  node: number | null;
  confidence: number | null;
  raw: string;
}

export interface JudgeOptions {
  target?: string;
  temperature?: number | null;
  responseFormat?: Record<string, unknown> | null;
  maxTokens?: number | null;
  /** Re-ask unreadable replies once, if the budget allows (default true); cut-off replies are
   * always asked again with more room while the budget lasts. */
  retry?: boolean;
  /** Calls to keep back from the budget when deciding whether to retry. */
  reserve?: number;
}

// --- reading replies (replies.mjs; the rules of docs/judge-graders.md) ------------------------

/** What a reply says: `value` when `ok`; else `problem` says why it could not be read. */
export declare class Reading<T = unknown> {
  value: T | null;
  problem: string;
  /** json | lines | table | text: where the value was found. */
  source: string;
  /** The object (or lines/table) the value came from, for extra fields such as `reason`. */
  data: unknown;
  raw: string;
  readonly ok: boolean;
  /** The problem and a short excerpt of the reply. */
  explain(): string;
}

export interface Dimension {
  code: string;
  aliases: string[];
  low: number;
  high: number;
  integer: boolean;
}

export declare function dimension(code: string, aliases?: string[], low?: number, high?: number, options?: { integer?: boolean }): Dimension;
export declare function replyProblem(text: string | null | undefined, finishReason?: string | null, refusal?: string | null): string | null;
export declare function stripReasoning(text: string): string;
export declare function isRefusal(text: string): boolean;
export declare function candidates(text: string): Array<Record<string, unknown> | unknown[]>;
export declare function excerpt(text: string | null | undefined, limit?: number): string;
export declare function scaledNumber(value: unknown, low?: number, high?: number): [number | null, string];
export declare function readVerdict(text: string | null | undefined, keys: string[]): Reading<boolean>;
export declare function readStatements(text: string | null | undefined): Reading<string[]>;
export declare function readRating(
  text: string | null | undefined,
  low?: number,
  high?: number,
  options?: { names?: string[]; integer?: boolean },
): Reading<number>;
export declare function readScores(text: string | null | undefined, dimensions: Dimension[]): Reading<Record<string, number>>;
export declare function readResult(result: InvokeResult, read: (text: string) => Reading): Reading;
export declare function judgeReplies(
  client: TargetClient,
  requests: InvokeRequest[],
  read: ((text: string) => Reading) | Array<(text: string) => Reading>,
  options?: { retry?: boolean; reserve?: number },
): Promise<Reading[]>;

export declare function parseJsonReply(text: string | null | undefined): Record<string, unknown> | unknown[] | null;
export declare function asBool(value: unknown): boolean | null;
export declare function readRelevance(reply: string): Verdict;
export declare function readAttribution(reply: string, contextSize: number): Verdict;
export declare function dedupeStatements(statements: string[]): string[];

export declare const FIRST_MAX_TOKENS: number;
export declare const RETRY_MAX_TOKENS: number;
export declare const RELEVANCE_FORMAT: Record<string, unknown>;
export declare const ATTRIBUTION_FORMAT: Record<string, unknown>;
export declare const STATEMENTS_FORMAT: Record<string, unknown>;

export declare const RELEVANCE_SYSTEM: string;
export declare const ATTRIBUTION_SYSTEM: string;
export declare const STATEMENTS_SYSTEM: string;
export declare const RETRY_REMINDER: string;
export declare function relevanceSystem(query: string, expected?: string | null): string;
export declare function relevancePrompt(passage: string): string;
export declare function attributionSystem(context: string[]): string;
export declare function attributionPrompt(statement: string): string;
export declare function statementsPrompt(text: string): string;
export declare function relevanceRequests(query: string, passages: string[], expected?: string | null, options?: JudgeOptions): InvokeRequest[];
export declare function attributionRequests(statements: string[], context: string[], options?: JudgeOptions): InvokeRequest[];
export declare function statementsRequest(text: string, options?: JudgeOptions): InvokeRequest;

export declare function judgeRelevance(
  client: TargetClient,
  query: string,
  passages: string[],
  options?: JudgeOptions & { expected?: string | null },
): Promise<Verdict[]>;
export declare function judgeAttribution(client: TargetClient, statements: string[], context: string[], options?: JudgeOptions): Promise<Verdict[]>;
export declare function extractStatements(client: TargetClient, text: string, options?: JudgeOptions): Promise<string[]>;

/** Requests per batch are split so no body nears the proxy's size limit. */
export declare const MAX_BATCH_BYTES: number;
export declare function chunkRequests(requests: InvokeRequest[], limit?: number): InvokeRequest[][];
