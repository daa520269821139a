// @evalrun/grader-sdk: talk to evalrun's judge proxy and speak the grader protocol.
// Zero dependencies; runs on Node >= 18 (global fetch), Bun and Deno.
// Prompts and parsing mirror the Python SDK (grader_sdk/_judge.py) so both judge alike.

export const PROTOCOL = 'evalrun.grader/1';
export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_ABSTAIN = 3;

const URL_ENV = ['AGENTV_TARGET_PROXY_URL', 'EVALRUN_PROXY_URL'];
const TOKEN_ENV = ['AGENTV_TARGET_PROXY_TOKEN', 'EVALRUN_PROXY_TOKEN'];
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
    if (payload.error && typeof payload.error === 'object') body = payload.error;
    else if (typeof payload.error === 'string') body = { message: payload.error };
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
    let data;
    try {
      data = await this._call('POST', '/invokeBatch', { requests: wire });
    } catch (err) {
      if (err instanceof ProxyError && err.status === 404 && !err.code) {
        return Promise.all(wire.map(async (r) => resultFromWire(await this._call('POST', '/invoke', r))));
      }
      throw err;
    }
    if (!data || !Array.isArray(data.responses)) throw new ProtocolError("invokeBatch response has no 'responses' list");
    if (data.responses.length !== wire.length) {
      throw new ProtocolError(`invokeBatch sent ${wire.length} requests but got ${data.responses.length} responses`);
    }
    return data.responses.map(resultFromWire);
  }

  /** {targetName, callCount, maxCalls, availableTargets, remaining} for this grader's token. */
  async getInfo() {
    const data = await this._call('GET', '/info');
    if (!data || typeof data !== 'object') throw new ProtocolError('expected an info object');
    const callCount = Number(data.callCount ?? data.call_count ?? 0);
    const maxCalls = Number(data.maxCalls ?? data.max_calls ?? 0);
    return {
      targetName: String(data.targetName ?? data.target_name ?? ''),
      callCount,
      maxCalls,
      availableTargets: (data.availableTargets ?? data.available_targets ?? []).map(String),
      remaining: Math.max(0, maxCalls - callCount),
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

/**
 * Run one grading: stdin payload -> fn(input) -> stdout JSON; sets the exit code
 * (0 graded, 3 abstained, 1 error) and resolves to it. fn may be async.
 */
export async function runScriptGrader(fn) {
  let code;
  try {
    const text = await readStdin();
    if (!text.trim()) throw new Error('no grader input on stdin (expected one JSON object)');
    const payload = JSON.parse(text);
    if (!payload || typeof payload !== 'object' || Array.isArray(payload)) throw new Error('grader input must be a JSON object');
    const result = coerceResult(await fn(toGraderInput(payload)));
    writeOut('stdout', JSON.stringify(result) + '\n');
    code = EXIT_OK;
  } catch (err) {
    if (err instanceof Abstain) {
      writeOut('stdout', JSON.stringify(abstention(err.reason, err.details)) + '\n');
      code = EXIT_ABSTAIN;
    } else if (ABSTAIN_ON.some((Cls) => err instanceof Cls)) {
      writeOut('stdout', JSON.stringify(abstention(`the judge could not be used: ${err.message}`)) + '\n');
      code = EXIT_ABSTAIN;
    } else {
      const trace = String(err?.stack ?? err);
      writeOut('stderr', trace.slice(-STDERR_TAIL) + '\n');
      code = EXIT_ERROR;
    }
  }
  setExitCode(code);
  return code;
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
// lenient reply parsing (mirrors grader_sdk/_judge.py)

const FENCE = /```[ \t]*(?:json|JSON)?[ \t]*\n?([\s\S]*?)```/g;

function tryParse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isContainer(v) {
  return v !== null && typeof v === 'object';
}

function isNonEmpty(v) {
  return Array.isArray(v) ? v.length > 0 : Object.keys(v).length > 0;
}

/** The end of the balanced JSON value starting at `start`, or -1 (string-aware). */
function balancedEnd(text, start) {
  const stack = [];
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') stack.push(ch === '{' ? '}' : ']');
    else if (ch === '}' || ch === ']') {
      if (stack.pop() !== ch) return -1;
      if (stack.length === 0) return i + 1;
    }
  }
  return -1;
}

function scan(text, opener) {
  let start = text.indexOf(opener);
  while (start !== -1) {
    const end = balancedEnd(text, start);
    if (end !== -1) {
      const value = tryParse(text.slice(start, end));
      if (isContainer(value) && isNonEmpty(value)) return value;
    }
    start = text.indexOf(opener, start + 1);
  }
  return null;
}

function repair(text) {
  text = text.replace(/\u201c|\u201d/g, '"').replace(/\u2019/g, "'");
  text = text.replace(/,\s*([}\]])/g, '$1');
  text = text.replace(/\bFalse\b/g, 'false').replace(/\bTrue\b/g, 'true').replace(/\bNone\b/g, 'null');
  if (!text.includes('"')) text = text.replace(/'/g, '"');
  return text;
}

/** The JSON object (or array) in a judge's reply: bare, fenced, or wrapped in prose; else null. */
export function parseJsonReply(text) {
  if (!text) return null;
  const stripped = String(text).trim().replace(/^\ufeff/, '');
  const candidates = [stripped, ...[...stripped.matchAll(FENCE)].map((m) => m[1].trim())];
  for (const candidate of candidates) {
    const value = tryParse(candidate);
    if (isContainer(value)) return value;
  }
  return scan(stripped, '{') ?? scan(stripped, '[') ?? scan(repair(stripped), '{');
}

const TRUE_WORDS = ['yes', 'true', 'relevant', 'attributable', 'supported', 'correct', '1', 'y', 'pass'];
const FALSE_WORDS = [
  'no', 'false', 'irrelevant', 'not relevant', 'not attributable', 'unattributable',
  'unsupported', 'not supported', 'incorrect', '0', 'n', 'fail',
];

/** yes/no-style values: booleans, 0/1, and strings like "yes" or "Not relevant"; else null. */
export function asBool(value) {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value === 0 || value === 1 ? value === 1 : null;
  if (typeof value === 'string') {
    const word = value.trim().toLowerCase().replace(/[^a-z0-9 ]/g, '').trim();
    if (FALSE_WORDS.includes(word)) return false;
    if (TRUE_WORDS.includes(word)) return true;
    const head = word ? word.split(' ')[0] : '';
    if (word.startsWith('not ') || word.startsWith('no ') || ['no', 'false', 'irrelevant'].includes(head)) return false;
    if (['yes', 'true', 'relevant', 'attributable', 'supported'].includes(head)) return true;
  }
  return null;
}

const REASON_KEYS = ['reason', 'reasoning', 'explanation', 'rationale', 'justification'];
const RELEVANCE_KEYS = ['relevant', 'is_relevant', 'isRelevant', 'relevance', 'verdict', 'answer'];
const ATTRIBUTION_KEYS = ['attributable', 'is_attributable', 'isAttributable', 'attributed', 'supported', 'verdict', 'answer'];
const NODE_KEYS = ['node', 'node_index', 'nodeIndex', 'passage', 'supporting_node', 'source', 'index'];

function firstObject(parsed) {
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed;
  if (Array.isArray(parsed) && parsed.length === 1 && parsed[0] && typeof parsed[0] === 'object' && !Array.isArray(parsed[0])) return parsed[0];
  return null;
}

function field(obj, keys) {
  const lowered = Object.fromEntries(Object.entries(obj).map(([k, v]) => [k.toLowerCase(), v]));
  for (const key of keys) {
    if (key in obj) return obj[key];
    if (key.toLowerCase() in lowered) return lowered[key.toLowerCase()];
  }
  return undefined;
}

function reasonOf(obj) {
  const v = field(obj, REASON_KEYS);
  return typeof v === 'string' ? v.trim() : '';
}

function confidenceOf(obj) {
  const v = field(obj, ['confidence', 'certainty']);
  if (v === undefined || v === null || typeof v === 'boolean' || v === '') return null;
  let n = Number(v);
  if (Number.isNaN(n)) return null;
  if (n > 1 && n <= 100) n /= 100;
  return Math.min(1, Math.max(0, n));
}

function plainTextVerdict(text) {
  const first = text.trim().split(/[.\n:,;!]/, 1)[0];
  const word = first.toLowerCase().replace(/[^a-z0-9 ]/g, '').trim();
  if (FALSE_WORDS.includes(word)) return false;
  return TRUE_WORDS.includes(word) ? true : null;
}

function verdict(ok, reason = '', node = null, confidence = null, raw = '') {
  return { ok, reason, node, confidence, raw };
}

export function readRelevance(reply) {
  const obj = firstObject(parseJsonReply(reply));
  if (!obj) {
    const ok = plainTextVerdict(reply);
    return ok === null ? null : verdict(ok, reply.trim().slice(0, 500), null, null, reply);
  }
  const ok = asBool(field(obj, RELEVANCE_KEYS));
  return ok === null ? null : verdict(ok, reasonOf(obj), null, confidenceOf(obj), reply);
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

export function readAttribution(reply, contextSize) {
  const obj = firstObject(parseJsonReply(reply));
  if (!obj) {
    const ok = plainTextVerdict(reply);
    return ok === null ? null : verdict(ok, reply.trim().slice(0, 500), null, null, reply);
  }
  const ok = asBool(field(obj, ATTRIBUTION_KEYS));
  if (ok === null) return null;
  return verdict(ok, reasonOf(obj), ok ? nodeNumber(field(obj, NODE_KEYS), contextSize) : null, confidenceOf(obj), reply);
}

export function dedupeStatements(statements) {
  const seen = new Set();
  const out = [];
  for (const s of statements) {
    const key = s.toLowerCase().replace(/\s+/g, ' ').replace(/^[ .]+|[ .]+$/g, '');
    if (key && !seen.has(key)) {
      seen.add(key);
      out.push(s);
    }
  }
  return out;
}

export function readStatements(reply) {
  const parsed = parseJsonReply(reply);
  let items;
  if (Array.isArray(parsed)) items = parsed;
  else if (parsed && typeof parsed === 'object') items = field(parsed, ['statements', 'claims', 'facts']);
  if (items === undefined && parsed === null) {
    const lines = reply.trim().split('\n').map((l) => l.trim()).filter(Boolean);
    const matches = lines.map((l) => l.match(/^(?:[-*\u2022]|\d+[.)])\s+(.*)$/));
    if (lines.length && matches.every(Boolean)) items = matches.map((m) => m[1]);
  }
  if (!Array.isArray(items)) return null;
  const texts = items.map((item) => {
    if (typeof item === 'string') return item.trim();
    if (item && typeof item === 'object') {
      const v = field(item, ['statement', 'text', 'claim', 'fact']);
      return typeof v === 'string' ? v.trim() : null;
    }
    return null;
  });
  if (texts.some((t) => t === null)) return null;
  return dedupeStatements(texts.filter(Boolean));
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

export function relevancePrompt(query, passage, expected = null) {
  const parts = [`<question>\n${query}\n</question>`];
  if (expected) parts.push(`<expected_answer>\n${expected}\n</expected_answer>`);
  parts.push(`<passage>\n${passage}\n</passage>`);
  parts.push('Is this passage relevant to the question? Reply with the JSON object only.');
  return parts.join('\n\n');
}

export function attributionPrompt(statement, context) {
  const numbered = context.map((p, i) => `[${i + 1}] ${p}`).join('\n');
  return (
    `<passages>\n${numbered}\n</passages>\n\n<statement>\n${statement}\n</statement>\n\n` +
    'Can the statement be attributed to the passages? Reply with the JSON object only.'
  );
}

export function statementsPrompt(text) {
  return `<text>\n${text}\n</text>\n\nList the distinct factual statements in this text. Reply with the JSON object only.`;
}

function buildRequest(question, system, task, options) {
  const request = { question, systemPrompt: system, task };
  const temperature = options.temperature === undefined ? 0 : options.temperature;
  if (temperature !== null) request.temperature = temperature;
  if (options.target) request.target = options.target;
  if (options.maxTokens) request.maxTokens = options.maxTokens;
  if (options.responseFormat) request.responseFormat = options.responseFormat;
  return request;
}

export function relevanceRequests(query, passages, expected = null, options = {}) {
  const siblings = [...passages];
  return passages.map((passage) =>
    buildRequest(relevancePrompt(query, passage, expected), RELEVANCE_SYSTEM, { kind: 'relevance', query, passage, siblings }, options),
  );
}

export function attributionRequests(statements, context, options = {}) {
  const ctx = [...context];
  return statements.map((statement) =>
    buildRequest(attributionPrompt(statement, ctx), ATTRIBUTION_SYSTEM, { kind: 'attribution', statement, context: ctx }, options),
  );
}

export function statementsRequest(text, options = {}) {
  return buildRequest(statementsPrompt(text), STATEMENTS_SYSTEM, { kind: 'statements', text }, options);
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

/** Ask once; re-ask the unreadable replies once (one batch) if the budget allows. */
async function askAll(client, requests, read, { retry = true, reserve = 0 } = {}) {
  const results = await batch(client, requests);
  if (results.length !== requests.length) throw new ProtocolError(`judge answered ${results.length} of ${requests.length} requests`);
  const out = results.map((r) => [read(r.rawText), r.rawText]);
  let bad = out.map(([v], i) => (v === null ? i : -1)).filter((i) => i >= 0);
  if (!bad.length || !retry) return out;
  let room = 0;
  try {
    room = (await client.getInfo()).remaining - reserve;
  } catch (err) {
    if (!(err instanceof ProxyError)) throw err;
  }
  bad = bad.slice(0, Math.max(0, room));
  if (!bad.length) return out;
  const again = bad.map((i) => ({ ...requests[i], question: requests[i].question + RETRY_REMINDER }));
  let retried;
  try {
    retried = await batch(client, again);
  } catch (err) {
    if (err instanceof BudgetExceeded) return out;
    throw err;
  }
  if (retried.length !== again.length) throw new ProtocolError(`judge answered ${retried.length} of ${again.length} retried requests`);
  bad.forEach((i, j) => {
    const value = read(retried[j].rawText);
    out[i] = value !== null ? [value, retried[j].rawText] : [null, out[i][1] + '\n--- retry ---\n' + retried[j].rawText];
  });
  return out;
}

function toVerdicts(pairs) {
  return pairs.map(([v, raw]) => v ?? verdict(null, "the judge's reply could not be read", null, null, raw));
}

/** One relevance verdict {ok, reason, node, confidence, raw} per passage, in order. */
export async function judgeRelevance(client, query, passages, options = {}) {
  if (!passages.length) return [];
  const requests = relevanceRequests(query, passages, options.expected ?? null, options);
  return toVerdicts(await askAll(client, requests, readRelevance, options));
}

/** One verdict per statement: supported by `context`, and by which passage (1-based node). */
export async function judgeAttribution(client, statements, context, options = {}) {
  if (!statements.length) return [];
  const requests = attributionRequests(statements, context, options);
  return toVerdicts(await askAll(client, requests, (raw) => readAttribution(raw, context.length), options));
}

/** The distinct factual statements of `text`; throws JudgeReplyError if unreadable. */
export async function extractStatements(client, text, options = {}) {
  const [[statements, raw]] = await askAll(client, [statementsRequest(text, options)], readStatements, options);
  if (statements === null) throw new JudgeReplyError("the judge's list of statements could not be read", raw);
  return statements;
}
