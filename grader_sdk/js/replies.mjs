// Reading judge replies: the same rules as the Python SDK's grader_sdk/replies.py
// (docs/judge-graders.md, "How replies are read"). A reply is read right or not at all:
// reasoning blocks are dropped, the LAST JSON-ish candidate that fits the expected shape wins,
// then key/value lines, markdown tables and explicit rating declarations; whatever does not fit
// gives a Reading with ok false and the reason. tests/data/reply_vectors.json holds the shared
// test vectors both SDKs must read alike.

export const EXCERPT_CHARS = 160;
export const MAX_READ_CHARS = 200_000;

const TRUE_WORDS = new Set(['yes', 'y', 'true', 'relevant', 'attributable', 'attributed', 'supported', 'correct', 'pass', '1']);
const FALSE_WORDS = new Set([
  'no', 'n', 'false', 'irrelevant', 'not relevant', 'not attributable', 'unattributable',
  'not attributed', 'unsupported', 'not supported', 'incorrect', 'fail', '0',
]);
const INTENSIFIERS = ['highly ', 'very ', 'clearly ', 'fully ', 'definitely ', 'directly ', 'strongly '];
const REASONING_TAGS = ['think', 'thinking', 'reasoning', 'reflection', 'scratchpad'];
const VERDICT_LISTS = ['verdicts', 'classifications', 'results', 'judgements', 'judgments'];
const STATEMENT_LISTS = ['statements', 'claims', 'facts', 'truths', 'sentences'];
const STATEMENT_FIELDS = ['statement', 'text', 'claim', 'fact'];
const NAME_FIELDS = ['name', 'dimension', 'code', 'metric', 'criterion', 'key', 'label'];
const VALUE_FIELDS = ['score', 'value', 'rating', 'choice', 'points'];
const RATING_KEYS = ['choice', 'score', 'rating', 'grade', 'verdict', 'answer', 'value'];

const NUM = String.raw`(-?\d+(?:\.\d+)?)`;
const SCALE = String.raw`(?:\s*(?:\/|out\s+of|of)\s*${NUM})?`;
const RE = {
  number: new RegExp(
    String.raw`^\s*\(?\s*${NUM}\s*(%)?${SCALE}\s*(%)?\s*\)?\s*(?:\((?:out\s+of|of|\/)\s*${NUM}\s*\))?\s*[.!]?\s*$`,
    'i',
  ),
  keyLine: /^[\s>*_#`-]*(?:\d+[.)]\s+)?[*_`]*([A-Za-z][A-Za-z0-9 _/()'&-]{0,60}?)[*_`]*\s*(?::|=|\s-\s|\s\u2013\s)\s*[*_`]*(.+?)[*_`]*\s*$/,
  bullet: /^\s*(?:[-*+\u2022\u2023\u25e6]|\(?\d{1,3}[.):]|\[\d{1,3}\])\s+(.+)$/,
  sentenceEnd: /(?<=[.!?;])\s+|\n+/,
  clause: /[.\n:;,!?()\u2013\u2014]|\s-\s/,
  firstPerson: new RegExp(
    String.raw`\b(?:i'd|i\s+would|i\s+will|i'll|i)\s+(?:rate|give|score|grade|assign)\s+(?:it|this|the\s+answer|this\s+answer|the\s+response)?\s*(?:a\s+|an\s+)?${NUM}(?!\.\d)(?:\s*(?:\/|out\s+of|of)\s*${NUM})?`,
    'gi',
  ),
  rated: new RegExp(String.raw`\brated\s+(?:it\s+)?(?:a\s+|an\s+)?${NUM}(?!\.\d)${SCALE}`, 'gi'),
  bare: new RegExp(String.raw`^[\s*_#>\x60'"\[\](){}:.]*${NUM}${SCALE}[\s*_#>\x60'"\[\](){}:.]*$`),
  heading: /^[\s#*_>`]*(?:final\s+|overall\s+)?(score|rating|choice|grade)/i,
  hypothetical: /\b(?:if|unless|had\s+(?:it|the|this|they|there)|(?<!\bi\s)would|needs?\s+to|to\s+(?:get|earn|reach|deserve)|could\s+(?:get|be)|might|a\s+perfect|for\s+a\s+\d)\b/i,
  refusal: /^\W*(?:i'?m\s+sorry|sorry\b|i\s+apologi[sz]e|i\s+(?:can(?:no|')t|cannot|won't|will\s+not|am\s+(?:not\s+able|unable)|'m\s+(?:not\s+able|unable)|must\s+decline|do\s+not\s+feel)|i'm\s+(?:not\s+able|unable)|as\s+an\s+ai\b|unfortunately,?\s+i\s+(?:can(?:no|')t|cannot|am\s+unable))/i,
  leading: new RegExp(String.raw`^\s*(\(?${NUM}\s*%?${SCALE}\s*%?\)?)\s*(?:$|[.,;:(\u2013\u2014]|-\s)`, 'i'),
  tableSeparator: /^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$/,
};
const ALNUM = /[\p{L}\p{N}]/u;
const ALPHA = /\p{L}/u;
const UPPER = /\p{Lu}/u;

/** What a reply says: `value` when `ok`; else `problem` says why it could not be read. */
export class Reading {
  constructor(value = null, problem = '', { source = '', data = null, raw = '' } = {}) {
    this.value = value;
    this.problem = problem;
    this.source = source;
    this.data = data;
    this.raw = raw;
  }

  get ok() {
    return !this.problem;
  }

  /** The problem and a short excerpt of the reply, for an abstention's reason. */
  explain() {
    const quoted = excerpt(this.raw);
    return quoted ? `${this.problem}: ${JSON.stringify(quoted)}` : this.problem;
  }
}

const unreadable = (problem, raw) => new Reading(null, problem, { raw });
const present = (v) => v !== undefined && v !== null;
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const squash = (text) => String(text).toLowerCase().replace(/[^a-z0-9]+/g, '');
const fmt = (n) => String(Number(n.toPrecision(6)));

/** One scored dimension: code, other names it may be given under, and its range. */
export function dimension(code, aliases = [], low = 0, high = 5, { integer = false } = {}) {
  return { code, aliases: [...aliases], low, high, integer };
}

function namesOf(dim) {
  return new Set([dim.code, ...dim.aliases].map(squash).filter(Boolean));
}

// --- what every reader starts from ------------------------------------------------------------

/** Why a reply must not be read at all (cut off, filtered, refused, empty), or null. */
export function replyProblem(text, finishReason = null, refusal = null) {
  const reason = String(finishReason ?? '').toLowerCase();
  if (reason === 'length') return 'the reply was cut off at the token limit (finish reason length)';
  if (reason === 'content_filter') return "the provider withheld the reply (finish reason content_filter)";
  if (refusal) return `the judge refused: ${excerpt(refusal)}`;
  if (!String(text ?? '').trim()) return "the judge's reply is empty";
  return null;
}

export function excerpt(text, limit = EXCERPT_CHARS) {
  const flat = String(text ?? '').split(/\s+/).filter(Boolean).join(' ');
  return flat.length <= limit ? flat : flat.slice(0, limit - 1) + '\u2026';
}

/** The reply without its reasoning blocks (<think>, <thinking>, <reasoning>, ...). */
export function stripReasoning(text) {
  for (const tag of REASONING_TAGS) {
    const open = new RegExp(`<${tag}>`, 'i');
    const closeAll = new RegExp(`</${tag}>`, 'gi');
    const closes = [...text.matchAll(closeAll)];
    if (closes.length) {
      const last = closes.at(-1);
      if (!open.test(text.slice(0, last.index))) text = text.slice(last.index + last[0].length);
    }
    for (;;) {
      const start = text.search(open);
      if (start === -1) break;
      const rest = text.slice(start);
      const close = rest.search(new RegExp(`</${tag}>`, 'i'));
      const stop = close === -1 ? text.length : start + close + tag.length + 3;
      text = text.slice(0, start) + text.slice(stop);
    }
  }
  return text.trim().replace(/^\ufeff/, '');
}

/** Does the reply open by declining ("I'm sorry", "I can't", "As an AI")? */
export function isRefusal(text) {
  return RE.refusal.test(String(text).trim());
}

// --- JSON-ish candidates -----------------------------------------------------------------------

/** Every complete JSON-ish object or array in `text`, in order of position. */
export function candidates(text) {
  text = String(text).slice(0, MAX_READ_CHARS);
  const found = [];
  let index = 0;
  for (;;) {
    const starts = [text.indexOf('{', index), text.indexOf('[', index)].filter((p) => p !== -1);
    if (!starts.length) return found;
    const start = Math.min(...starts);
    const end = balancedEnd(text, start);
    const value = end !== -1 ? parseCandidate(text.slice(start, end)) : undefined;
    if (value !== null && typeof value === 'object') {
      found.push(value);
      index = end;
    } else {
      index = start + 1;
    }
  }
}

function balancedEnd(text, start) {
  const closers = { '{': '}', '[': ']' };
  const stack = [];
  let i = start;
  const n = text.length;
  while (i < n) {
    const ch = text[i];
    if ('"\'\u201c'.includes(ch) && !(ch === "'" && i > 0 && ALNUM.test(text[i - 1]))) {
      const close = ch === '\u201c' ? '\u201d' : ch;
      i += 1;
      while (i < n && text[i] !== close) {
        if (text[i] === '\\') i += 1;
        else if (text[i] === '\n' && close === "'") return -1;
        i += 1;
      }
    } else if (text.startsWith('//', i)) {
      const newline = text.indexOf('\n', i);
      i = newline === -1 ? n : newline;
      continue;
    } else if (text.startsWith('/*', i)) {
      const closeAt = text.indexOf('*/', i + 2);
      if (closeAt === -1) return -1;
      i = closeAt + 2;
      continue;
    } else if (ch in closers) {
      stack.push(closers[ch]);
    } else if (ch === '}' || ch === ']') {
      if (!stack.length || stack.pop() !== ch) return -1;
      if (!stack.length) return i + 1;
    }
    i += 1;
  }
  return -1;
}

function tryJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function parseCandidate(chunk) {
  const strict = tryJson(chunk);
  if (strict !== undefined) return strict;
  const relaxed = relax(chunk);
  return relaxed === null ? undefined : tryJson(relaxed);
}

/** Near-JSON rewritten into JSON token by token (strings kept intact), or null. */
function relax(chunk) {
  const out = [];
  let i = 0;
  const n = chunk.length;
  while (i < n) {
    const ch = chunk[i];
    if ('"\'\u201c'.includes(ch)) {
      const close = ch === '\u201c' ? '\u201d' : ch;
      let j = i + 1;
      const buf = [];
      while (j < n && chunk[j] !== close) {
        if (chunk[j] === '\\' && j + 1 < n) {
          buf.push(chunk.slice(j, j + 2));
          j += 2;
          continue;
        }
        buf.push(chunk[j] === '"' ? '\\"' : chunk[j]);
        j += 1;
      }
      if (j >= n) return null;
      let body = buf.join('');
      if (close !== '"') body = body.replaceAll("\\'", "'");
      out.push(`"${body}"`);
      i = j + 1;
    } else if (chunk.startsWith('//', i)) {
      const newline = chunk.indexOf('\n', i);
      i = newline === -1 ? n : newline;
    } else if (chunk.startsWith('/*', i)) {
      const end = chunk.indexOf('*/', i + 2);
      if (end === -1) return null;
      i = end + 2;
    } else if (ALPHA.test(ch) || ch === '_' || ch === '$') {
      let j = i;
      while (j < n && (ALNUM.test(chunk[j]) || '_$-'.includes(chunk[j]))) j += 1;
      const word = chunk.slice(i, j);
      const rest = chunk.slice(j).trimStart();
      if (rest.startsWith(':')) out.push(JSON.stringify(word));
      else if (['true', 'false', 'null'].includes(word)) out.push(word);
      else if (word === 'True' || word === 'False' || word === 'None') out.push({ True: 'true', False: 'false', None: 'null' }[word]);
      else return null;
      i = j;
    } else if (ch === ',') {
      let rest = chunk.slice(i + 1).trimStart();
      while (rest.startsWith('//') || rest.startsWith('/*')) {
        const cut = rest.startsWith('//') ? rest.indexOf('\n') : rest.indexOf('*/') + 1;
        rest = cut <= 0 ? '' : rest.slice(cut + 1).trimStart();
      }
      if (!(rest.startsWith('}') || rest.startsWith(']'))) out.push(',');
      i += 1;
    } else {
      out.push(ch);
      i += 1;
    }
  }
  return out.join('');
}

/** The last JSON-ish object or array in a reply after its reasoning is dropped, or null. */
export function parseJsonReply(text) {
  const found = candidates(stripReasoning(String(text ?? '')));
  return found.length ? found.at(-1) : null;
}

// --- values --------------------------------------------------------------------------------------

function firstClause(text) {
  const match = RE.clause.exec(text);
  return match ? text.slice(0, match.index) : text;
}

function verdictWords(text) {
  let words = text.toLowerCase().replace(/[^a-z0-9 ]+/g, ' ').replace(/\s+/g, ' ').trim();
  for (const prefix of INTENSIFIERS) if (words.startsWith(prefix)) words = words.slice(prefix.length);
  if (FALSE_WORDS.has(words)) return false;
  if (TRUE_WORDS.has(words)) return true;
  return null;
}

/** A yes/no value: booleans, 0/1 and words such as "yes", "Not relevant"; else null. */
export function asBool(value) {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value === 0 || value === 1 ? value === 1 : null;
  if (typeof value !== 'string') return null;
  return verdictWords(firstClause(value));
}

/** [number on the low..high scale, problem]; stated scales honoured, nothing clamped. */
export function scaledNumber(value, low = 0, high = 5) {
  if (typeof value === 'boolean' || !present(value)) return [null, 'no number'];
  if (isObject(value)) {
    for (const key of VALUE_FIELDS) {
      const found = get(value, key);
      if (present(found)) return scaledNumber(found, low, high);
    }
    return [null, 'no number'];
  }
  let number;
  let denominator = null;
  let percent = false;
  if (typeof value === 'number') {
    number = value;
  } else if (typeof value === 'string') {
    const match = RE.number.exec(value);
    if (!match) return [null, `${JSON.stringify(excerpt(value, 40))} is not a number`];
    number = Number(match[1]);
    percent = Boolean(match[2] || match[4]);
    denominator = match[3] ?? match[5] ?? null;
  } else {
    return [null, 'no number'];
  }
  if (!Number.isFinite(number)) return [null, 'not a finite number'];
  if (percent) {
    number = low + ((high - low) * number) / 100;
  } else if (denominator !== null) {
    const scale = Number(denominator);
    if (scale <= 0 || number > scale) return [null, `${fmt(number)} out of ${fmt(scale)} is not a rating`];
    if (scale !== high) {
      if (low !== 0) return [null, `a rating out of ${fmt(scale)} does not fit the ${fmt(low)}..${fmt(high)} scale`];
      number = (number / scale) * high;
    }
  } else if (high === 1 && number > 1) {
    if (!(number > 10 && number <= 100)) return [null, `${fmt(number)} on a 0..1 scale states no scale (a percentage? out of 5?)`];
    number /= 100;
  }
  if (number < low - 1e-9 || number > high + 1e-9) return [null, `${fmt(number)} is outside ${fmt(low)}..${fmt(high)}`];
  return [number, ''];
}

/** mapping[name] ignoring case and punctuation; undefined when absent. */
function get(mapping, name) {
  if (Object.prototype.hasOwnProperty.call(mapping, name)) return mapping[name];
  const wanted = squash(name);
  for (const [key, value] of Object.entries(mapping)) if (squash(key) === wanted) return value;
  return undefined;
}

// --- text shapes ---------------------------------------------------------------------------------

function keyLines(text, clashes = new Set()) {
  const out = new Map();
  for (const line of text.split(/\r?\n|\r/)) {
    const match = RE.keyLine.exec(line);
    if (!match) continue;
    const key = match[1].trim();
    const value = match[2].trim().replace(/^[*_`]+|[*_`]+$/g, '').trim();
    if (!key || !value) continue;
    if (out.has(key) && out.get(key) !== value) clashes.add(key);
    out.set(key, value);
  }
  for (const key of clashes) out.delete(key);
  return Object.fromEntries(out);
}

/** A text value's number with its scale ("8/10 - plain words" -> "8/10"), else the text. */
function leadingNumber(text) {
  const match = RE.leading.exec(text);
  return match ? match[1] : text;
}

function cells(line) {
  return line.trim().replace(/^\|+|\|+$/g, '').split('|').map((c) => c.trim());
}

function table(text) {
  const lines = text.split(/\r?\n|\r/).map((l) => l.trim());
  for (let i = 0; i < lines.length - 1; i++) {
    if (!lines[i].includes('|') || !RE.tableSeparator.test(lines[i + 1])) continue;
    const header = cells(lines[i]);
    let column = header.findIndex((c) => VALUE_FIELDS.includes(squash(c)));
    if (column === -1) column = header.length > 1 ? 1 : -1;
    if (column < 1) return {};
    const rows = {};
    for (const line of lines.slice(i + 2)) {
      if (!line.includes('|')) break;
      const row = cells(line);
      if (row.length > column) rows[row[0].replace(/^[*_` ]+|[*_` ]+$/g, '')] = row[column].replace(/^[*_` ]+|[*_` ]+$/g, '');
    }
    return rows;
  }
  return {};
}

// --- readers -------------------------------------------------------------------------------------

function start(text) {
  const raw = String(text ?? '');
  const body = stripReasoning(raw.slice(0, MAX_READ_CHARS));
  if (!body) {
    const problem = raw.trim() ? 'the reply holds only reasoning, no answer' : "the judge's reply is empty";
    return [raw, body, unreadable(problem, raw)];
  }
  return [raw, body, null];
}

const refused = (raw) => unreadable('the judge declined to answer', raw);

function objectOf(candidate) {
  if (isObject(candidate)) return candidate;
  if (Array.isArray(candidate) && candidate.length === 1 && isObject(candidate[0])) return candidate[0];
  return null;
}

function verdictField(candidate, fields) {
  const obj = objectOf(candidate);
  if (obj === null) return [false, null];
  for (const key of fields) {
    const value = get(obj, key);
    if (value !== undefined) return [true, value];
  }
  for (const name of VERDICT_LISTS) {
    const inner = get(obj, name);
    if (Array.isArray(inner) && inner.length === 1) return verdictField(inner[0], fields);
  }
  return [false, null];
}

/** A yes/no verdict under one of `keys` (JSON candidate, then Key: value lines, then the opening). */
export function readVerdict(text, keys) {
  const [raw, body, empty] = start(text);
  if (empty) return empty;
  const fields = [...keys, 'verdict', 'answer', 'attributed', 'decision', 'label'];
  const foundJson = candidates(body);
  for (const candidate of [...foundJson].reverse()) {
    const [found, value] = verdictField(candidate, fields);
    if (!found) continue;
    const verdict = asBool(value);
    if (verdict === null) return unreadable(`the verdict ${excerpt(JSON.stringify(value) ?? 'null', 40)} is not yes or no`, raw);
    return new Reading(verdict, '', { source: 'json', data: objectOf(candidate), raw });
  }
  const clashes = new Set();
  const lines = keyLines(body, clashes);
  const wanted = new Set(fields.map(squash));
  if ([...clashes].some((k) => wanted.has(squash(k)))) return unreadable('the reply gives different verdicts', raw);
  if (/^[`]*\s*[{[]/.test(body)) {
    return unreadable(foundJson.length ? "no yes/no verdict in the reply's JSON" : "the reply's JSON is incomplete or invalid", raw);
  }
  for (const key of Object.keys(lines).reverse()) {
    if (!wanted.has(squash(key))) continue;
    const verdict = verdictWords(firstClause(lines[key]));
    if (verdict === null) return unreadable(`${key}: ${JSON.stringify(excerpt(lines[key], 40))} is not yes or no`, raw);
    return new Reading(verdict, '', { source: 'lines', data: lines, raw });
  }
  if (isRefusal(body)) return refused(raw);
  const verdict = verdictWords(firstClause(body));
  if (verdict !== null) return new Reading(verdict, '', { source: 'text', raw });
  return unreadable('no yes/no verdict found in the reply', raw);
}

function statementItems(candidate) {
  if (isObject(candidate)) {
    for (const key of STATEMENT_LISTS) {
      const inner = get(candidate, key);
      if (Array.isArray(inner)) return statementItems(inner);
    }
    return null;
  }
  if (!Array.isArray(candidate)) return null;
  const out = [];
  for (const item of candidate) {
    if (typeof item === 'string') out.push(item.trim());
    else if (isObject(item)) {
      const key = STATEMENT_FIELDS.find((k) => get(item, k));
      const value = key === undefined ? null : get(item, key);
      if (typeof value !== 'string') return null;
      out.push(value.trim());
    } else return null;
  }
  return out.filter(Boolean);
}

export function dedupeStatements(statements) {
  const seen = new Set();
  const out = [];
  for (const s of statements) {
    const key = s.toLowerCase().split(/\s+/).filter(Boolean).join(' ').replace(/^[ .]+|[ .]+$/g, '');
    if (key && !seen.has(key)) {
      seen.add(key);
      out.push(s);
    }
  }
  return out;
}

/** A list of statements: a JSON-ish list, else bullet/numbered lines, else sentence lines. */
export function readStatements(text) {
  const [raw, body, empty] = start(text);
  if (empty) return empty;
  for (const candidate of candidates(body).reverse()) {
    const items = statementItems(candidate);
    if (items !== null) return new Reading(dedupeStatements(items), '', { source: 'json', data: candidate, raw });
  }
  if (isRefusal(body)) return refused(raw);
  const lines = body.split(/\r?\n|\r/).map((l) => l.trim());
  const marks = lines.map((l) => RE.bullet.exec(l));
  const at = marks.map((m, i) => (m ? i : -1)).filter((i) => i >= 0);
  if (at.length) {
    const inside = lines.slice(at[0], at.at(-1) + 1);
    if (inside.every((line, k) => marks[at[0] + k] || !line)) {
      return new Reading(dedupeStatements(marks.filter(Boolean).map((m) => m[1].trim())), '', { source: 'lines', raw });
    }
    return unreadable('text between the listed statements', raw);
  }
  let sentences = lines.filter(Boolean);
  if (sentences.length && sentences[0].endsWith(':')) sentences = sentences.slice(1);
  if (sentences.length >= 2 && sentences.every((s) => '.!?'.includes(s.at(-1)) && UPPER.test(s[0]))) {
    return new Reading(dedupeStatements(sentences), '', { source: 'lines', raw });
  }
  return unreadable('no list of statements found in the reply', raw);
}

function namedScores(items) {
  const out = {};
  for (const item of items) {
    if (!isObject(item)) return {};
    const nameKey = NAME_FIELDS.find((k) => typeof get(item, k) === 'string');
    const valueKey = VALUE_FIELDS.find((k) => present(get(item, k)));
    if (nameKey === undefined || valueKey === undefined) return {};
    out[get(item, nameKey)] = get(item, valueKey);
  }
  return out;
}

function ratingField(candidate, keys, dim) {
  if (Array.isArray(candidate)) {
    const named = namedScores(candidate);
    const entries = Object.entries(named);
    if (entries.length) {
      const names = namesOf(dim);
      for (const [name, value] of entries) if (names.has(squash(name))) return [true, value];
      if (entries.length === 1) return [true, entries[0][1]];
    }
    const obj = objectOf(candidate);
    return obj === null ? [false, null] : ratingField(obj, keys, dim);
  }
  if (!isObject(candidate)) return [false, null];
  for (const key of keys) {
    const value = get(candidate, key);
    if (present(value)) return [true, value];
  }
  return [false, null];
}

function rated(value, dim, raw, source, data) {
  const [number, problem] = scaledNumber(value, dim.low, dim.high);
  if (number === null) return unreadable(`the rating ${problem}`, raw);
  if (dim.integer && !Number.isInteger(number)) return unreadable(`the rating ${fmt(number)} is not one of the choices`, raw);
  return new Reading(number, '', { source, data, raw });
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const asWritten = (number, scale) => (scale ? `${number}/${scale}` : number);

function declaredRating(body, dim, raw) {
  const names = [dim.code, ...dim.aliases].filter(Boolean).map(escapeRe).join('|') || 'score';
  const declared = new RegExp(
    String.raw`\b((?:final|overall|revised|updated|corrected|adjusted|new|then)\s+)?(score|rating|choice|grade|verdict|${names})\b[*_\x60\s]*(?:is|of|:|=|-|\u2013|\u2014)?[*_\x60\s]*(?:a\s+|an\s+)?${NUM}(?!\.\d)(?:\s*(?:\/|out\s+of|of)\s*${NUM})?(?![\d.]*\d)`,
    'gi',
  );
  const found = [];
  for (const sentence of body.split(RE.sentenceEnd)) {
    if (!sentence || !sentence.trim() || RE.hypothetical.test(sentence)) continue;
    for (const m of sentence.matchAll(declared)) found.push([Boolean(m[1]), asWritten(m[3], m[4])]);
    for (const pattern of [RE.firstPerson, RE.rated]) {
      for (const m of sentence.matchAll(pattern)) found.push([false, asWritten(m[1], m[2])]);
    }
  }
  const lines = body.split(/\r?\n|\r/).filter((l) => l.trim());
  lines.forEach((line, i) => {
    const bare = RE.bare.exec(line);
    if (bare && (i === lines.length - 1 || (i > 0 && RE.heading.test(lines[i - 1])))) {
      found.push([i === lines.length - 1, asWritten(bare[1], bare[2])]);
    }
  });
  if (!found.length) return unreadable('no rating found in the reply', raw);
  const final = found.filter(([marked]) => marked).map(([, v]) => v);
  const values = new Set(found.map(([, v]) => squash(v)));
  if (values.size > 1 && !final.length) return unreadable('the reply gives different ratings', raw);
  return rated(final.length ? final.at(-1) : found.at(-1)[1], dim, raw, 'text', null);
}

/** One rating on low..high (`names`: the dimension's own names, accepted as keys). */
export function readRating(text, low = 1, high = 5, { names = [], integer = true } = {}) {
  const [raw, body, empty] = start(text);
  if (empty) return empty;
  const dim = dimension(names[0] ?? 'rating', names.slice(1), low, high, { integer });
  const keys = [...RATING_KEYS, ...names];
  for (const candidate of candidates(body).reverse()) {
    const [found, value] = ratingField(candidate, keys, dim);
    if (found) return rated(value, dim, raw, 'json', candidate);
  }
  const rows = table(body);
  const wanted = new Set([...namesOf(dim), ...RATING_KEYS]);
  const row = Object.keys(rows).find((k) => wanted.has(squash(k)));
  if (row !== undefined) return rated(rows[row], dim, raw, 'table', rows);
  if (isRefusal(body)) return refused(raw);
  return declaredRating(body, dim, raw);
}

function isScoreObject(value) {
  return isObject(value) && VALUE_FIELDS.some((k) => present(get(value, k)));
}

function flatten(value, out = {}, depth = 0) {
  if (depth > 8) return out;
  const setDefault = (k, v) => {
    if (!(k in out)) out[k] = v;
  };
  if (Array.isArray(value)) {
    const named = namedScores(value);
    for (const [name, score] of Object.entries(named)) setDefault(name, score);
    if (!Object.keys(named).length) for (const item of value) if (item !== null && typeof item === 'object') flatten(item, out, depth + 1);
    return out;
  }
  if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (item !== null && typeof item === 'object' && !isScoreObject(item)) flatten(item, out, depth + 1);
      else setDefault(String(key), item);
    }
  }
  return out;
}

function scoresFrom(found, dimensions) {
  const byName = {};
  for (const [k, v] of Object.entries(found)) byName[squash(k)] = v;
  const scores = {};
  const missing = [];
  const bad = [];
  for (const dim of dimensions) {
    const name = [...namesOf(dim)].find((n) => n in byName);
    const value = name === undefined ? null : byName[name];
    if (!present(value)) {
      missing.push(dim.code);
      continue;
    }
    const [number, problem] = scaledNumber(value, dim.low, dim.high);
    if (number === null) bad.push(`${dim.code} (${problem})`);
    else scores[dim.code] = number;
  }
  if (missing.length || bad.length) {
    const parts = [];
    if (missing.length) parts.push(`missing ${missing.join(', ')}`);
    if (bad.length) parts.push(`unreadable ${bad.join(', ')}`);
    return [null, parts.join('; ')];
  }
  return [scores, ''];
}

/** Every dimension's score as {code: number}: a JSON candidate, else a table, else Key: value lines. */
export function readScores(text, dimensions) {
  const [raw, body, empty] = start(text);
  if (empty) return empty;
  let best = '';
  for (const candidate of candidates(body).reverse()) {
    const [scores, problem] = scoresFrom(flatten(candidate), dimensions);
    if (scores) return new Reading(scores, '', { source: 'json', data: objectOf(candidate) ?? candidate, raw });
    best ||= problem;
  }
  for (const [source, text] of [['table', table(body)], ['lines', keyLines(body)]]) {
    if (!Object.keys(text).length) continue;
    const found = Object.fromEntries(Object.entries(text).map(([k, v]) => [k, leadingNumber(v)]));
    const [scores, problem] = scoresFrom(found, dimensions);
    if (scores) return new Reading(scores, '', { source, data: found, raw });
    best ||= problem;
  }
  if (!best && isRefusal(body)) return refused(raw);
  return unreadable(best || 'no scores found in the reply', raw);
}
