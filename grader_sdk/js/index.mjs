// @evalrun/grader-sdk: talk to evalrun's judge proxy and speak the grader protocol.
// Zero dependencies; runs on Node >= 18 (global fetch), Bun and Deno.
// Prompts mirror the Python SDK (grader_sdk/_judge.py) and replies are read by replies.mjs, the
// twin of grader_sdk/replies.py, so both judge alike.

import {
  Reading,
  readStatements,
  readVerdict,
  replyProblem,
  scaledNumber,
} from './replies.mjs';

export {
  Reading,
  asBool,
  candidates,
  dedupeStatements,
  dimension,
  excerpt,
  isRefusal,
  parseJsonReply,
  readRating,
  readScores,
  readStatements,
  readVerdict,
  replyProblem,
  scaledNumber,
  stripReasoning,
} from './replies.mjs';

export const PROTOCOL = 'evalrun.grader/1';
export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_ABSTAIN = 3;
/** Set by evalrun to 'serve' when the grader should run in stream mode. */
export const MODE_ENV = 'EVALRUN_GRADER_MODE';
export const SERVE = 'serve';

const URL_ENV = ['AGENTV_TARGET_PROXY_URL', 'AGENTV_PROVIDER_PROXY_URL', 'EVALRUN_PROXY_URL'];
const TOKEN_ENV = ['AGENTV_TARGET_PROXY_TOKEN', 'AGENTV_PROVIDER_PROXY_TOKEN', 'EVALRUN_PROXY_TOKEN'];
const DEFAULT_TIMEOUT_MS = 600_000;
const STDERR_TAIL = 4000;

// ---------------------------------------------------------------------------------------------
// errors

export class ProxyError extends Error {
  constructor(message, { status = null, code = null, body = {} } = {}) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.body = body ?? {};
  }
}
export class ProxyNotConfigured extends ProxyError {}
export class ProxyUnavailable extends ProxyError {}
export class ProtocolError extends ProxyError {}
export class Unauthorized extends ProxyError {}
export class BudgetExceeded extends ProxyError {
  get limit() {
    return Number.isInteger(this.body.limit) ? this.body.limit : null;
  }
  get used() {
    return Number.isInteger(this.body.used) ? this.body.used : null;
  }
  /** Budget units the refused batch would have cost (absent for a single call). */
  get requested() {
    return Number.isInteger(this.body.requested) ? this.body.requested : null;
  }
}
export class UnknownTarget extends ProxyError {
  get allowed() {
    return Array.isArray(this.body.allowed) ? this.body.allowed.map(String) : [];
  }
}
export class BadRequest extends ProxyError {}
export class PayloadTooLarge extends ProxyError {}
export class UnsupportedRequest extends ProxyError {}
export class UpstreamError extends ProxyError {}
export class UpstreamTimeout extends UpstreamError {}
export class ShuttingDown extends ProxyError {}

/** The judge answered, but the reply could not be read even after a retry. */
export class JudgeReplyError extends Error {
  constructor(message, raw = '') {
    super(message);
    this.name = 'JudgeReplyError';
    this.raw = raw;
  }
}

/** Throw to say "cannot grade this case": exit 3, the case is unscored (never scored 0). */
export class Abstain extends Error {
  constructor(reason, details = undefined) {
    super(reason);
    this.name = 'Abstain';
    this.reason = reason;
    this.details = details;
  }
}

const BY_CODE = {
  unauthorized: Unauthorized,
  max_calls_exceeded: BudgetExceeded,
  unknown_target: UnknownTarget,
  bad_request: BadRequest,
  payload_too_large: PayloadTooLarge,
  unsupported_request: UnsupportedRequest,
  upstream_error: UpstreamError,
  upstream_timeout: UpstreamTimeout,
  shutting_down: ShuttingDown,
};
const BY_STATUS = {
  400: BadRequest,
  401: Unauthorized,
  413: PayloadTooLarge,
  422: UnsupportedRequest,
  429: BudgetExceeded,
  502: UpstreamError,
  503: ShuttingDown,
  504: UpstreamTimeout,
};

/** Map an HTTP error answer to its typed error (the wire code wins over the status). */
export function errorFromResponse(status, payload, fallbackText = '') {
  let body = {};
  if (payload && typeof payload === 'object') {
    if (payload.error && typeof payload.error === 'object') {
      body = payload.error; // OpenAI's shape (the /v1 routes)
    } else if (typeof payload.error === 'string') {
      // AgentV's shape: the message, with code and extra fields beside it
      const { error, ...extra } = payload;
      body = { ...extra, message: error };
    }
    else if (typeof payload.detail === 'string') body = { message: payload.detail };
  }
  const code = typeof body.code === 'string' ? body.code : null;
  const Cls = (code && BY_CODE[code]) || BY_STATUS[status] || ProxyError;
  const message = String(body.message || fallbackText.trim().slice(0, 300) || `HTTP ${status}`);
  return new Cls(`${message} (HTTP ${status}${code ? ', ' + code : ''})`, { status, code, body });
}

// ---------------------------------------------------------------------------------------------
// client

function getEnv(name) {
  try {
    if (typeof Deno !== 'undefined' && Deno.env) return Deno.env.get(name);
  } catch {
    // no --allow-env: fall through
  }
  if (typeof process !== 'undefined' && process.env) return process.env[name];
  return undefined;
}

/** {url, token} from AgentV's variable names, falling back to evalrun's. */
export function proxySettings(env = undefined) {
  const read = env ? (n) => env[n] : getEnv;
  const url = URL_ENV.map(read).find((v) => v) || '';
  const token = TOKEN_ENV.map(read).find((v) => v) || '';
  if (!url || !token) {
    throw new ProxyNotConfigured(
      'no judge proxy: AGENTV_TARGET_PROXY_URL/TOKEN (or EVALRUN_PROXY_URL/TOKEN) are not set; ' +
        'give this grader `target: {max_calls: N}` in the eval file',
    );
  }
  return { url, token };
}

const CAMEL = { system_prompt: 'systemPrompt', max_tokens: 'maxTokens', response_format: 'responseFormat' };

function requestToWire(item) {
  if (typeof item === 'string') return { question: item };
  if (!item || typeof item !== 'object') throw new TypeError('an invoke request must be an object');
  const out = {};
  for (const [key, value] of Object.entries(item)) {
    if (value !== undefined && value !== null) out[CAMEL[key] ?? key] = value;
  }
  if (typeof out.question !== 'string') throw new TypeError("an invoke request needs a 'question' string");
  return out;
}

function resultFromWire(data) {
  if (!data || typeof data !== 'object') throw new ProtocolError('expected an invoke response object');
  let rawText = data.rawText ?? data.raw_text;
  const output = data.output;
  if (typeof rawText !== 'string') {
    const last = Array.isArray(output) ? [...output].reverse().find((m) => typeof m?.content === 'string') : null;
    if (!last) throw new ProtocolError('invoke response has neither rawText nor output text');
    rawText = last.content;
  }
  return {
    output: Array.isArray(output) ? output : [{ role: 'assistant', content: rawText }],
    rawText,
    tokenUsage: data.tokenUsage ?? data.token_usage ?? {},
    target: String(data.target ?? ''),
    cached: Boolean(data.cached),
    latencyMs: Number(data.latencyMs ?? data.latency_ms ?? 0),
    finishReason: data.finishReason ?? data.finish_reason ?? null,
    refusal: data.refusal || null,
  };
}

export class TargetClient {
  constructor({ url, token, timeoutMs = DEFAULT_TIMEOUT_MS } = {}) {
    if (!url) throw new ProxyNotConfigured('no proxy URL given');
    this.url = String(url).replace(/\/+$/, '');
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  /** One judge call: a question string or {question, systemPrompt?, target?, temperature?, maxTokens?, responseFormat?, task?}. */
  async invoke(request, extra = {}) {
    const body = requestToWire(typeof request === 'string' ? { question: request, ...extra } : request);
    return resultFromWire(await this._call('POST', '/invoke', body));
  }

  /** All requests in one HTTP call; the proxy runs them concurrently and keeps the order. */
  async invokeBatch(requests) {
    const wire = [...requests].map(requestToWire);
    if (wire.length === 0) return [];
    const data = await this._call('POST', '/invokeBatch', { requests: wire });
    if (!data || !Array.isArray(data.responses)) throw new ProtocolError("invokeBatch response has no 'responses' list");
    if (data.responses.length !== wire.length) {
      throw new ProtocolError(`invokeBatch sent ${wire.length} requests but got ${data.responses.length} responses`);
    }
    // a request the proxy could not answer carries its error in its place
    const failed = data.responses.find((r) => r && typeof r === 'object' && typeof r.error === 'string');
    if (failed) throw errorFromResponse(Number.isInteger(failed.status) ? failed.status : 502, failed);
    return data.responses.map(resultFromWire);
  }

  /** {targetName, callCount, maxCalls, availableTargets, callsPerRequest, remaining} for this
   * grader's token; ``remaining`` counts requests to the default target. */
  async getInfo() {
    const data = await this._call('GET', '/info');
    if (!data || typeof data !== 'object') throw new ProtocolError('expected an info object');
    const callCount = Number(data.callCount ?? data.call_count ?? 0);
    const maxCalls = Number(data.maxCalls ?? data.max_calls ?? 0);
    // budget units one request to the default target costs (a judge panel: one per member)
    const callsPerRequest = Math.max(1, Number(data.callsPerRequest ?? data.calls_per_request ?? 1));
    return {
      targetName: String(data.targetName ?? data.target_name ?? ''),
      callCount,
      maxCalls,
      availableTargets: (data.availableTargets ?? data.available_targets ?? []).map(String),
      callsPerRequest,
      remaining: Math.floor(Math.max(0, maxCalls - callCount) / callsPerRequest),
    };
  }

  info() {
    return this.getInfo();
  }

  async _call(method, path, body = undefined) {
    const headers = { Authorization: `Bearer ${this.token}`, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    let text;
    try {
      response = await fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await response.text();
    } catch (err) {
      throw new ProxyUnavailable(`cannot reach the judge proxy at ${this.url}: ${err?.cause?.message ?? err?.message ?? err}`);
    }
    let payload = null;
    try {
      payload = text.trim() ? JSON.parse(text) : null;
    } catch {
      payload = null;
    }
    if (response.status >= 400) throw errorFromResponse(response.status, payload, text);
    if (payload === null) throw new ProtocolError(`proxy answered HTTP ${response.status} without a JSON body`);
    return payload;
  }
}

/** A client for the proxy named in the environment (or the given url/token). */
export function createTargetClient(options = {}) {
  const { url, token } = options.url && options.token ? options : { ...proxySettings(), ...stripEmpty(options) };
  return new TargetClient({ ...options, url, token });
}

function stripEmpty(obj) {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined && v !== null && v !== ''));
}

// ---------------------------------------------------------------------------------------------
// grader input (snake_case fields, camelCase views)

const TEXT_KEYS = ['text', 'content', 'page_content', 'pageContent', 'chunk', 'passage', 'document'];
const QUERY_KEYS = ['query', 'q', 'search_query', 'searchQuery', 'question'];
const ALIASES = {
  case_id: ['case_id', 'caseId', 'eval_case_id', 'evalCaseId', 'id'],
  criteria: ['criteria', 'expected_outcome', 'expectedOutcome'],
  input: ['input', 'input_messages', 'inputMessages'],
  output: ['output', 'answer', 'candidate_answer', 'candidateAnswer'],
  messages: ['messages', 'output_messages', 'outputMessages'],
  expected_output: ['expected_output', 'expectedOutput', 'expected_messages', 'expectedMessages'],
  reference_answer: ['reference_answer', 'referenceAnswer'],
};

function maybeJson(value) {
  if (typeof value === 'string') {
    const s = value.trim();
    if (s.startsWith('[') || s.startsWith('{')) {
      try {
        return JSON.parse(s);
      } catch {
        return value;
      }
    }
  }
  return value;
}

function normalizeToolCall(call) {
  const out = { ...call };
  const fn = out.function && typeof out.function === 'object' ? out.function : null;
  if (!('tool' in out)) out.tool = out.name ?? fn?.name ?? '';
  if (!('input' in out)) out.input = maybeJson(out.arguments ?? out.args ?? fn?.arguments ?? null);
  if (!('output' in out)) out.output = out.result ?? out.response ?? null;
  return out;
}

function normalizeMessage(message, role) {
  if (typeof message === 'string') message = { role, content: message };
  else if (!message || typeof message !== 'object') message = { role, content: String(message) };
  const out = { ...message };
  const calls = (out.tool_calls ?? out.toolCalls ?? []).filter((c) => c && typeof c === 'object').map(normalizeToolCall);
  out.role ??= role;
  out.content ??= null;
  out.tool_calls = calls;
  Object.defineProperty(out, 'toolCalls', { value: calls, enumerable: false });
  return out;
}

function asMessages(value, role) {
  if (value === null || value === undefined) return [];
  if (typeof value === 'string') return [normalizeMessage({ role, content: value }, role)];
  if (!Array.isArray(value)) value = [value];
  return value.map((m) => normalizeMessage(m, role));
}

export function messageText(message) {
  const content = message?.content;
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => (typeof p === 'string' ? p : typeof p?.text === 'string' ? p.text : null))
      .filter((p) => p !== null)
      .join('\n');
  }
  return String(content);
}

function lastText(messages, role) {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === role) {
      const text = messageText(messages[i]);
      if (text) return text;
    }
  }
  return null;
}

/** One passage as text: a string, a document object's text field, or its JSON. */
export function nodeText(item) {
  if (item === null || item === undefined) return null;
  if (typeof item === 'string') return item;
  if (Array.isArray(item)) return JSON.stringify(item);
  if (typeof item === 'object') {
    for (const key of TEXT_KEYS) if (typeof item[key] === 'string') return item[key];
    return JSON.stringify(item);
  }
  return String(item);
}

/** The passages of one tool output: a list, {results: [...]}, or a string. */
export function resultsOf(output) {
  output = maybeJson(output);
  if (output === null || output === undefined) return [];
  if (!Array.isArray(output) && typeof output === 'object') {
    if (output.results === undefined || output.results === null) return [];
    output = output.results;
  }
  if (['string', 'number'].includes(typeof output)) output = [output];
  if (!Array.isArray(output)) return [];
  return output.map(nodeText).filter((t) => t !== null);
}

function queryOf(input) {
  input = maybeJson(input);
  if (typeof input === 'string') return input;
  if (input && typeof input === 'object') for (const k of QUERY_KEYS) if (typeof input[k] === 'string') return input[k];
  return null;
}

/** Per tool call, in order: {tool, query, results} (optionally only the named tools). */
export function toolCallResults(messages, tools = null) {
  const wanted = Array.isArray(tools) ? new Set(tools) : null;
  const groups = [];
  for (const message of messages) {
    for (const call of message.tool_calls ?? []) {
      if (wanted && !wanted.has(call.tool)) continue;
      groups.push({ tool: call.tool ?? '', query: queryOf(call.input), results: resultsOf(call.output) });
    }
  }
  return groups;
}

/** config.retrieval_context as passages (nested lists flattened), or null when unset. */
export function configuredContext(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap((x) => (Array.isArray(x) ? x : [x])).map(nodeText).filter((t) => t !== null);
  return [String(value)];
}

function pick(payload, name) {
  for (const alias of ALIASES[name] ?? [name]) {
    if (payload[alias] !== undefined && payload[alias] !== null) return payload[alias];
  }
  return null;
}

/** The stdin payload as a grader input: snake_case fields plus camelCase views. */
export function toGraderInput(payload) {
  const inputs = asMessages(pick(payload, 'input'), 'user');
  const expected = asMessages(pick(payload, 'expected_output'), 'assistant');
  const messages = asMessages(pick(payload, 'messages'), 'assistant');
  let output = pick(payload, 'output');
  if (output && typeof output === 'object') output = lastText(asMessages(output, 'assistant'), 'assistant');
  let question = payload.question;
  if (typeof question !== 'string' || !question) question = lastText(inputs, 'user') ?? '';
  let reference = pick(payload, 'reference_answer');
  if (typeof reference !== 'string') reference = lastText(expected, 'assistant');
  const grader = { ...(payload.grader ?? {}) };
  if (grader.max_calls === undefined && grader.maxCalls !== undefined) grader.max_calls = grader.maxCalls;
  const criteria = pick(payload, 'criteria');
  const input = {
    protocol: String(payload.protocol ?? PROTOCOL),
    case_id: String(pick(payload, 'case_id') ?? ''),
    question,
    criteria: criteria === null ? null : typeof criteria === 'string' ? criteria : JSON.stringify(criteria),
    input: inputs,
    output: typeof output === 'string' ? output : null,
    messages,
    expected_output: expected,
    reference_answer: reference,
    config: { ...(payload.config ?? {}) },
    metadata: { ...(payload.metadata ?? {}) },
    grader,
    attempt: Number.isInteger(payload.attempt) ? payload.attempt : 0,
  };
  const toolCalls = () => toolCallResults(expected, input.config.tools ?? null);
  const retrieval = () => configuredContext(input.config.retrieval_context) ?? toolCalls().flatMap((g) => g.results);
  const expectedText = () => (input.criteria ?? '').trim() || (input.reference_answer ?? '').trim() || null;
  const hidden = {
    caseId: input.case_id,
    expectedOutput: expected,
    referenceAnswer: reference,
    maxCalls: Number.isInteger(grader.max_calls) ? grader.max_calls : null,
    raw: payload,
    toolCallResults: toolCalls,
    tool_call_results: toolCalls,
    retrievalContext: retrieval,
    retrieval_context: retrieval,
    expectedText,
    expected_text: expectedText,
  };
  for (const [key, value] of Object.entries(hidden)) Object.defineProperty(input, key, { value, enumerable: false });
  return input;
}

// ---------------------------------------------------------------------------------------------
// the protocol runner

async function readStdin() {
  if (typeof Deno !== 'undefined' && Deno.stdin) return await new Response(Deno.stdin.readable).text();
  if (typeof Bun !== 'undefined' && Bun.stdin) return await Bun.stdin.text();
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function writeOut(stream, text) {
  if (typeof Deno !== 'undefined' && Deno[stream]) {
    Deno[stream].writeSync(new TextEncoder().encode(text));
  } else {
    process[stream].write(text);
  }
}

function setExitCode(code) {
  if (typeof Deno !== 'undefined' && typeof Deno.exit === 'function') Deno.exit(code);
  else process.exitCode = code;
}

/** Accept a result object, a number (score) or a boolean (pass); check the score range. */
export function coerceResult(value) {
  if (typeof value === 'boolean') return { score: value ? 1 : 0, pass: value };
  if (typeof value === 'number') value = { score: value };
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`a grader must return an object, number or boolean, not ${JSON.stringify(value)}`);
  }
  const out = { ...value };
  if (out.passed !== undefined && out.pass === undefined) {
    out.pass = out.passed;
    delete out.passed;
  }
  if (out.score !== undefined && out.score !== null) {
    if (typeof out.score !== 'number' || Number.isNaN(out.score) || out.score < 0 || out.score > 1) {
      throw new RangeError(`score must be a number in 0..1, got ${JSON.stringify(out.score)}`);
    }
  } else if (out.pass === undefined && out.checks === undefined) {
    throw new TypeError("a grader result needs 'score', 'pass' or 'checks'");
  }
  return out;
}

const ABSTAIN_ON = [ProxyUnavailable, UpstreamError, ShuttingDown, UnsupportedRequest, JudgeReplyError];

/** (exit code, document to print) for one payload; a failure's stack goes to stderr. */
async function gradePayload(fn, payload) {
  try {
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw new Error('grader input must be a JSON object');
    return [EXIT_OK, coerceResult(await fn(toGraderInput(payload)))];
  } catch (err) {
    if (err instanceof Abstain) return [EXIT_ABSTAIN, abstention(err.reason, err.details)];
    if (ABSTAIN_ON.some((Cls) => err instanceof Cls)) {
      return [EXIT_ABSTAIN, abstention(`the judge could not be used: ${err.message}`)];
    }
    writeOut('stderr', String(err?.stack ?? err).slice(-STDERR_TAIL) + '\n');
    return [EXIT_ERROR, null];
  }
}

/**
 * Run one grading: stdin payload -> fn(input) -> stdout JSON; sets the exit code
 * (0 graded, 3 abstained, 1 error) and resolves to it. fn may be async.
 * In stream mode (EVALRUN_GRADER_MODE=serve) it serves one case per stdin line instead.
 */
export async function runScriptGrader(fn) {
  if (getEnv(MODE_ENV) === SERVE) return serveScriptGrader(fn);
  let code;
  let document = null;
  try {
    const text = await readStdin();
    if (!text.trim()) throw new Error('no grader input on stdin (expected one JSON object)');
    [code, document] = await gradePayload(fn, JSON.parse(text));
  } catch (err) {
    writeOut('stderr', String(err?.stack ?? err).slice(-STDERR_TAIL) + '\n');
    code = EXIT_ERROR;
  }
  if (document !== null) writeOut('stdout', JSON.stringify(document) + '\n');
  setExitCode(code);
  return code;
}

async function* stdinChunks() {
  if (typeof Deno !== 'undefined' && Deno.stdin) yield* Deno.stdin.readable;
  else if (typeof Bun !== 'undefined' && Bun.stdin) yield* Bun.stdin.stream();
  else yield* process.stdin;
}

async function* stdinLines() {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of stdinChunks()) {
    buffered += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      yield buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
    }
  }
  if (buffered.trim()) yield buffered;
}

function setEnv(name, value) {
  try {
    if (typeof Deno !== 'undefined' && Deno.env) {
      if (value === undefined) Deno.env.delete(name);
      else Deno.env.set(name, value);
      return;
    }
  } catch {
    // no --allow-env
  }
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

/**
 * Stream mode (docs/grader-protocol.md): each stdin line is {nonce, payload, env}; each answer
 * is one stdout line {nonce, exit, result} with the case's nonce, so evalrun can tell an answer
 * from a stray line. The case's env (its proxy token) is set while it runs, so
 * createTargetClient() works unchanged; console.log goes to stderr, stdout carries answers only.
 * A line that cannot be read is answered with no nonce, which evalrun takes as a broken worker.
 */
export async function serveScriptGrader(fn) {
  const saved = { log: console.log, info: console.info, debug: console.debug };
  for await (const line of stdinLines()) {
    if (!line.trim()) continue;
    let code;
    let document = null;
    let env = {};
    let nonce = null;
    try {
      const data = JSON.parse(line);
      if (!data || typeof data.payload !== 'object' || data.payload === null) {
        throw new Error('a stream-mode line must be {"nonce": ..., "payload": {...}, "env": {...}}');
      }
      nonce = typeof data.nonce === 'string' ? data.nonce : null;
      env = data.env && typeof data.env === 'object' ? data.env : {};
      const previous = Object.fromEntries(Object.keys(env).map((k) => [k, getEnv(k)]));
      for (const [k, v] of Object.entries(env)) setEnv(k, String(v));
      console.log = console.info = console.debug = console.error;
      try {
        [code, document] = await gradePayload(fn, data.payload);
      } finally {
        Object.assign(console, saved);
        for (const [k, v] of Object.entries(previous)) setEnv(k, v);
      }
    } catch (err) {
      writeOut('stderr', String(err?.stack ?? err).slice(-STDERR_TAIL) + '\n');
      code = EXIT_ERROR;
    }
    writeOut('stdout', JSON.stringify({ nonce, exit: code, result: document }) + '\n');
  }
  return EXIT_OK;
}

function abstention(reason, details) {
  const out = { abstain: true, reason };
  if (details !== undefined) out.details = details;
  return out;
}

/** Define and run a grader (AgentV style): it reads stdin at once and sets the exit code. */
export function defineScriptGrader(fn) {
  return runScriptGrader(fn);
}

// ---------------------------------------------------------------------------------------------
// reading replies: the rules live in replies.mjs (the twin of grader_sdk/replies.py)

const REASON_KEYS = ['reason', 'reasoning', 'explanation', 'rationale', 'justification'];
const RELEVANCE_KEYS = ['relevant', 'is_relevant', 'relevance'];
const ATTRIBUTION_KEYS = ['attributable', 'is_attributable', 'attributed', 'supported'];
const NODE_KEYS = ['node', 'node_index', 'passage', 'supporting_node', 'source', 'index'];

function field(obj, keys) {
  if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return undefined;
  const lowered = Object.fromEntries(Object.entries(obj).map(([k, v]) => [k.toLowerCase(), v]));
  for (const key of keys) if (key.toLowerCase() in lowered) return lowered[key.toLowerCase()];
  return undefined;
}

function verdict(ok, reason = '', node = null, confidence = null, raw = '') {
  return { ok, reason, node, confidence, raw };
}

function verdictOf(reading, nodeOf = null) {
  if (!reading.ok) return verdict(null, reading.explain(), null, null, reading.raw);
  const data = reading.data && typeof reading.data === 'object' && !Array.isArray(reading.data) ? reading.data : {};
  let reason = field(data, REASON_KEYS);
  if (typeof reason !== 'string') reason = reading.source === 'json' ? '' : reading.raw.trim().slice(0, 500);
  const node = reading.value && nodeOf ? nodeOf(data) : null;
  const [confidence] = scaledNumber(field(data, ['confidence', 'certainty']), 0, 1);
  return verdict(reading.value, reason.trim(), node, confidence, reading.raw);
}

function nodeNumber(value, size) {
  if (typeof value === 'boolean') return null;
  if (Array.isArray(value) && value.length) value = value[0];
  if (typeof value === 'string') {
    const m = value.match(/\d+/);
    value = m ? Number(m[0]) : null;
  }
  return Number.isInteger(value) && value >= 1 && value <= size ? value : null;
}

/** A relevance verdict {ok, reason, node, confidence, raw}; ok is null when unreadable. */
export function readRelevance(reply) {
  return verdictOf(readVerdict(reply, RELEVANCE_KEYS));
}

/** An attribution verdict; `node` is the supporting passage (1-based) when attributable. */
export function readAttribution(reply, contextSize) {
  return verdictOf(readVerdict(reply, ATTRIBUTION_KEYS), (obj) => nodeNumber(field(obj, NODE_KEYS), contextSize));
}

// ---------------------------------------------------------------------------------------------
// judge requests (same prompts as the Python SDK)

export const RELEVANCE_SYSTEM =
  "You judge search results for a question-answering system. Decide whether ONE retrieved " +
  "passage is relevant to the user's question: relevant means it contains information that " +
  'helps answer the question (or supports the expected answer, when one is shown). A passage ' +
  'that only shares the topic or a keyword, without helping to answer, is not relevant. ' +
  'Judge the passage on its own merits, not by its position in the list.\n' +
  'Reply with one JSON object and nothing else: {"relevant": true or false, ' +
  '"reason": "<one short sentence>", "confidence": <number between 0 and 1>}';

export const ATTRIBUTION_SYSTEM =
  'You check whether a statement is backed by retrieved passages. The statement is ' +
  'attributable when the numbered passages state it, or plainly imply it, alone or together. ' +
  'Use only the passages, not your own knowledge; a statement that is only partly supported ' +
  'is not attributable.\n' +
  'Reply with one JSON object and nothing else: {"attributable": true or false, "node": ' +
  '<number of the passage that supports it best, or null>, ' +
  '"reason": "<one short sentence>", "confidence": <number between 0 and 1>}';

export const STATEMENTS_SYSTEM =
  'You split a text into its distinct factual statements. Each statement asserts one fact, ' +
  "stands on its own (name the subject instead of using pronouns) and keeps the text's " +
  'meaning; add nothing, and leave out opinions, questions and filler. Merge duplicates.\n' +
  'Reply with one JSON object and nothing else: {"statements": ["<statement>", ...]}';

export const RETRY_REMINDER =
  '\n\nNote: your previous reply to this request could not be read. Reply again with only ' +
  'the JSON object described, with no other text.';

/** The system message of every relevance call of one list: instructions, question and expected
 * answer, the same for every passage (a cacheable prefix; docs/judge-graders.md). */
export function relevanceSystem(query, expected = null) {
  const parts = [RELEVANCE_SYSTEM, `<question>\n${query}\n</question>`];
  if (expected) parts.push(`<expected_answer>\n${expected}\n</expected_answer>`);
  return parts.join('\n\n');
}

/** The user message of one relevance call: only the passage varies, and it comes last. */
export function relevancePrompt(passage) {
  return (
    `<passage>\n${passage}\n</passage>\n\n` +
    'Is this passage relevant to the question? Reply with the JSON object only.'
  );
}

/** The system message of every attribution call of one case: instructions and numbered passages. */
export function attributionSystem(context) {
  const numbered = context.map((p, i) => `[${i + 1}] ${p}`).join('\n');
  return `${ATTRIBUTION_SYSTEM}\n\n<passages>\n${numbered}\n</passages>`;
}

/** The user message of one attribution call: only the statement varies. */
export function attributionPrompt(statement) {
  return (
    `<statement>\n${statement}\n</statement>\n\n` +
    'Can the statement be attributed to the passages? Reply with the JSON object only.'
  );
}

export function statementsPrompt(text) {
  return `<text>\n${text}\n</text>\n\nList the distinct factual statements in this text. Reply with the JSON object only.`;
}

/** max_tokens of a first judge call, and the most a retry after a cut-off reply asks for. */
export const FIRST_MAX_TOKENS = 2048;
export const RETRY_MAX_TOKENS = 16_384;

function schema(name, properties) {
  return {
    type: 'json_schema',
    json_schema: {
      name,
      strict: true,
      schema: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false },
    },
  };
}

export const RELEVANCE_FORMAT = schema('relevance_verdict', {
  relevant: { type: 'boolean' },
  reason: { type: 'string' },
  confidence: { type: 'number' },
});
export const ATTRIBUTION_FORMAT = schema('attribution_verdict', {
  attributable: { type: 'boolean' },
  node: { type: ['integer', 'null'] },
  reason: { type: 'string' },
  confidence: { type: 'number' },
});
export const STATEMENTS_FORMAT = schema('statements', { statements: { type: 'array', items: { type: 'string' } } });

/** One wire request; options may override (or, given null, drop) the defaults. */
function buildRequest(question, system, task, responseFormat, options) {
  const request = { question, systemPrompt: system, task };
  for (const [key, def] of [
    ['temperature', 0],
    ['target', null],
    ['maxTokens', FIRST_MAX_TOKENS],
    ['responseFormat', responseFormat],
  ]) {
    const value = options[key] === undefined ? def : options[key];
    if (value !== null && value !== undefined) request[key] = value;
  }
  return request;
}

export function relevanceRequests(query, passages, expected = null, options = {}) {
  const siblings = [...passages];
  const system = relevanceSystem(query, expected);
  return passages.map((passage) =>
    buildRequest(
      relevancePrompt(passage),
      system,
      { kind: 'relevance', query, passage, siblings },
      RELEVANCE_FORMAT,
      options,
    ),
  );
}

export function attributionRequests(statements, context, options = {}) {
  const ctx = [...context];
  const system = attributionSystem(ctx);
  return statements.map((statement) =>
    buildRequest(
      attributionPrompt(statement),
      system,
      { kind: 'attribution', statement, context: ctx },
      ATTRIBUTION_FORMAT,
      options,
    ),
  );
}

export function statementsRequest(text, options = {}) {
  return buildRequest(statementsPrompt(text), STATEMENTS_SYSTEM, { kind: 'statements', text }, STATEMENTS_FORMAT, options);
}

/** Batches are split so no request body nears the proxy's size limit (siblings repeat per item). */
export const MAX_BATCH_BYTES = 512_000;

export function chunkRequests(requests, limit = MAX_BATCH_BYTES) {
  const chunks = [[]];
  let size = 0;
  const encoder = new TextEncoder();
  for (const request of requests) {
    const item = encoder.encode(JSON.stringify(request)).length + 1;
    if (chunks.at(-1).length && size + item > limit) {
      chunks.push([]);
      size = 0;
    }
    chunks.at(-1).push(request);
    size += item;
  }
  return chunks;
}

async function batch(client, requests) {
  const out = [];
  for (const chunk of chunkRequests(requests)) out.push(...(await client.invokeBatch(chunk)));
  return out;
}

/** Read one invoke result, unless it must not be read (cut off, filtered, refused, empty). */
export function readResult(result, read) {
  const text = result?.rawText ?? '';
  const problem = replyProblem(text, result?.finishReason ?? null, result?.refusal ?? null);
  return problem ? new Reading(null, problem, { raw: text }) : read(text);
}

function secondTry(request, result) {
  if (result?.finishReason === 'length') {
    const room = request.maxTokens ?? request.max_tokens ?? FIRST_MAX_TOKENS;
    if (room >= RETRY_MAX_TOKENS) return null;
    const { max_tokens: _dropped, ...rest } = request;
    return { ...rest, maxTokens: Math.min(RETRY_MAX_TOKENS, room * 4) };
  }
  if (result?.refusal || result?.finishReason === 'content_filter') return null;
  return { ...request, question: (request.question ?? '') + RETRY_REMINDER };
}

/**
 * Send `requests` as one batch and read each reply with `read` (one reader, or one per request);
 * ask again once, budget permitting, for cut-off replies (always, with more room) and for
 * unreadable ones (when `retry`). One Reading per request, in order.
 */
export async function judgeReplies(client, requests, read, { retry = true, reserve = 0 } = {}) {
  const readers = typeof read === 'function' ? requests.map(() => read) : [...read];
  if (readers.length !== requests.length) throw new Error(`${readers.length} readers for ${requests.length} requests`);
  const results = await batch(client, requests);
  if (results.length !== requests.length) throw new ProtocolError(`judge answered ${results.length} of ${requests.length} requests`);
  const out = results.map((r, i) => readResult(r, readers[i]));
  let again = [];
  out.forEach((reading, i) => {
    if (reading.ok || !(retry || results[i]?.finishReason === 'length')) return;
    const request = secondTry(requests[i], results[i]);
    if (request) again.push([i, request]);
  });
  if (!again.length) return out;
  let room = 0;
  try {
    room = (await client.getInfo()).remaining - reserve;
  } catch (err) {
    if (!(err instanceof ProxyError)) throw err;
    return out;
  }
  again = again.slice(0, Math.max(0, room));
  if (!again.length) return out;
  let retried;
  try {
    retried = await batch(client, again.map(([, r]) => r));
  } catch (err) {
    if (err instanceof BudgetExceeded) return out;
    throw err;
  }
  if (retried.length !== again.length) throw new ProtocolError(`judge answered ${retried.length} of ${again.length} retried requests`);
  again.forEach(([i], j) => {
    let reading = readResult(retried[j], readers[i]);
    if (!reading.ok) {
      const first = out[i];
      reading = new Reading(null, `${first.problem}; asked again: ${reading.problem}`, {
        raw: `${first.raw}\n--- retry ---\n${reading.raw}`,
      });
    }
    out[i] = reading;
  });
  return out;
}

/** One relevance verdict {ok, reason, node, confidence, raw} per passage, in order. */
export async function judgeRelevance(client, query, passages, options = {}) {
  if (!passages.length) return [];
  const requests = relevanceRequests(query, passages, options.expected ?? null, options);
  const readings = await judgeReplies(client, requests, (raw) => readVerdict(raw, RELEVANCE_KEYS), options);
  return readings.map((r) => verdictOf(r));
}

/** One verdict per statement: supported by `context`, and by which passage (1-based node). */
export async function judgeAttribution(client, statements, context, options = {}) {
  if (!statements.length) return [];
  const requests = attributionRequests(statements, context, options);
  const readings = await judgeReplies(client, requests, (raw) => readVerdict(raw, ATTRIBUTION_KEYS), options);
  return readings.map((r) => verdictOf(r, (obj) => nodeNumber(field(obj, NODE_KEYS), context.length)));
}

/** The distinct factual statements of `text`; throws JudgeReplyError if unreadable. */
export async function extractStatements(client, text, options = {}) {
  const [reading] = await judgeReplies(client, [statementsRequest(text, options)], readStatements, options);
  if (!reading.ok) throw new JudgeReplyError(`the judge's list of statements could not be read (${reading.explain()})`, reading.raw);
  return reading.value;
}
