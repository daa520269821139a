// Contextual precision on the JS SDK: the same metric, config and output as
// graders/contextual_precision.py. Run: node graders/js/contextual-precision.mjs < payload.json
//
// score = (1/R) * sum_k precision@k * r_k over the ranked nodes; 0 when no node is relevant.

import {
  Abstain,
  asBool,
  BudgetExceeded,
  configuredContext,
  createTargetClient,
  defineScriptGrader,
  FIRST_MAX_TOKENS,
  judgeRelevance,
  judgeReplies,
  parseJsonReply,
  ProtocolError,
  Reading,
  scaledNumber,
} from '../../grader_sdk/js/index.mjs';

const AGGREGATES = ['weighted', 'mean'];
const MODES = ['per-item', 'batched'];

// Batched mode, as graders/_rag_batched.py asks and reads it (docs/contextual-precision.md,
// "Judge modes"): one call per ranked list, every node numbered, one verdict per number.
const BATCH_RELEVANCE_SYSTEM =
  "You grade the passages a search system returned for a user's question. For every numbered " +
  'passage, decide on its own whether it is relevant: it carries information that helps ' +
  'answer the question (or backs the expected answer, when one is given). Sharing a topic or ' +
  "a keyword without helping to answer is not enough, and a passage's place in the list does " +
  'not matter.\n' +
  'Give exactly one verdict for every passage number, each number once, in order, as one JSON ' +
  'object and nothing else: {"verdicts": [{"number": <passage number>, "relevant": true or ' +
  'false, "reason": "<one short sentence>", "confidence": <0 to 1>}, ...]}';

const VERDICT_ITEM = {
  number: { type: 'integer' },
  relevant: { type: 'boolean' },
  reason: { type: 'string' },
  confidence: { type: 'number' },
};
const RELEVANCE_BATCH_FORMAT = {
  type: 'json_schema',
  json_schema: {
    name: 'relevance_verdicts',
    strict: true,
    schema: {
      type: 'object',
      properties: {
        verdicts: {
          type: 'array',
          items: { type: 'object', properties: VERDICT_ITEM, required: Object.keys(VERDICT_ITEM), additionalProperties: false },
        },
      },
      required: ['verdicts'],
      additionalProperties: false,
    },
  },
};

function relevanceBatchRequest(query, passages, expected, target) {
  const parts = [`<question>\n${query}\n</question>`];
  if (expected) parts.push(`<expected_answer>\n${expected}\n</expected_answer>`);
  parts.push(`<passages>\n${passages.map((p, i) => `[${i + 1}] ${p}`).join('\n')}\n</passages>`);
  parts.push(`Give one verdict for each of the ${passages.length} passages.`);
  const request = {
    question: parts.join('\n\n'),
    systemPrompt: BATCH_RELEVANCE_SYSTEM,
    task: { kind: 'relevance-batch', query, passages: [...passages] },
    temperature: 0,
    maxTokens: FIRST_MAX_TOKENS,
    responseFormat: RELEVANCE_BATCH_FORMAT,
  };
  if (target !== null && target !== undefined) request.target = target;
  return request;
}

// One numbered entry's verdict {ok, reason, confidence}, or why it cannot be read.
function itemVerdict(item) {
  const raw = JSON.stringify(item);
  const reason = typeof item.reason === 'string' ? item.reason.trim() : '';
  const [confidence] = scaledNumber(item.confidence, 0, 1);
  if (item.abstain === true) return { ok: null, reason: reason || 'no reason given', node: null, confidence: null, raw };
  const ok = asBool(item.relevant);
  if (ok === null) return `its 'relevant' is ${pyRepr(item.relevant)}, not true or false`;
  return { ok, reason, node: null, confidence, raw };
}

// A value as Python's repr writes it, so both graders give the same reason.
function pyRepr(value) {
  if (value === undefined || value === null) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'string') return `'${value}'`;
  return JSON.stringify(value);
}

function readNumbered(raw, count) {
  const reply = parseJsonReply(raw);
  const entries = reply && typeof reply === 'object' && !Array.isArray(reply) ? reply.verdicts : undefined;
  if (!Array.isArray(entries)) return new Reading(null, "the reply has no 'verdicts' list", { raw });
  const byNumber = new Map();
  const problems = [];
  entries.forEach((entry, i) => {
    const number = entry && typeof entry === 'object' && !Array.isArray(entry) ? entry.number : undefined;
    if (!Number.isInteger(number)) {
      problems.push(`entry ${i + 1} has no integer 'number'`);
    } else if (number < 1 || number > count) {
      problems.push(`number ${number} is not one of 1..${count}`);
    } else if (byNumber.has(number)) {
      problems.push(`number ${number} is given twice`);
    } else {
      const verdict = itemVerdict(entry);
      if (typeof verdict === 'string') problems.push(`number ${number}: ${verdict}`);
      else byNumber.set(number, verdict);
    }
  });
  const missing = [];
  for (let n = 1; n <= count; n += 1) if (!byNumber.has(n)) missing.push(n);
  if (missing.length) problems.push(`no verdict for number(s) ${missing.join(', ')}`);
  if (problems.length) return new Reading(null, problems.slice(0, 3).join('; '), { raw, data: reply });
  const verdicts = Array.from({ length: count }, (_, i) => byNumber.get(i + 1));
  return new Reading(verdicts, '', { source: 'json', data: reply, raw });
}

// Abstain when the budget cannot pay for `needed` requests; a judge panel costs one call per
// member (docs/judges.md).
function checkBudget(used, maxCalls, perRequest, needed, work) {
  const remaining = Math.floor(Math.max(0, maxCalls - used) / perRequest);
  if (needed <= remaining) return;
  const cost = perRequest > 1 ? ` at ${perRequest} calls each` : '';
  throw new Abstain(
    `not enough judge calls: ${work} needs ${needed}${cost}, but max_calls is ${maxCalls} ` +
      `with ${maxCalls - used} left; raise \`target: {max_calls: ...}\` to at least ${used + needed * perRequest} ` +
      '(a little more leaves room to ask again after unreadable or cut-off replies)',
    { needed, remaining, max_calls: maxCalls },
  );
}

// The proxy refused a batch of `batch` requests as over budget, before making any call of it.
function budgetRefused(err, needed, batch, work) {
  if (err.limit !== null && err.used !== null) {
    checkBudget(err.used, err.limit, Math.max(1, Math.floor((err.requested ?? batch) / batch)), needed, work);
  }
  throw new Abstain(`not enough judge calls: ${work} needs ${needed}; the proxy refused: ${err.message}`);
}

function precisionAtK(flags) {
  let found = 0;
  return flags.map((relevant, i) => {
    if (relevant) found += 1;
    return found / (i + 1);
  });
}

function averagePrecision(flags) {
  const total = flags.filter(Boolean).length;
  if (total === 0) return 0;
  const atK = precisionAtK(flags);
  return atK.reduce((sum, p, i) => sum + (flags[i] ? p : 0), 0) / total;
}

function aggregate(scored, how) {
  const present = scored.filter(([, size]) => size > 0);
  if (!present.length) return 0;
  if (how === 'mean') return present.reduce((s, [score]) => s + score, 0) / present.length;
  const weight = present.reduce((s, [, size]) => s + size, 0);
  return present.reduce((s, [score, size]) => s + score * size, 0) / weight;
}

function snippet(text, limit = 160) {
  const flat = text.split(/\s+/).filter(Boolean).join(' ');
  return flat.length <= limit ? flat : flat.slice(0, limit - 1) + '\u2026';
}

function formatScore(value) {
  if (value === 0 || value === 1) return value.toFixed(1);
  return value.toFixed(3).replace(/0+$/, '').replace(/\.$/, '');
}

function retrievalGroups(input, perToolCall) {
  const configured = input.config.retrieval_context;
  if (configured !== undefined && configured !== null) {
    const nested = Array.isArray(configured) && configured.some(Array.isArray);
    if (perToolCall && nested) {
      return configured.map((x, i) => ({ label: `list ${i + 1}`, nodes: configuredContext(Array.isArray(x) ? x : [x]) ?? [], query: null, tool: null }));
    }
    return [{ label: 'retrieval_context', nodes: configuredContext(configured) ?? [], query: null, tool: null }];
  }
  const calls = input.toolCallResults();
  if (perToolCall) {
    return calls.map((c, i) => ({ label: `call ${i + 1}`, nodes: [...c.results], query: c.query, tool: c.tool }));
  }
  return [{ label: 'retrieval_context', nodes: calls.flatMap((c) => c.results), query: null, tool: null }];
}

function describe(group) {
  const relevant = group.nodes.filter((n) => n.relevant);
  if (!relevant.length) return `none of the ${group.total} nodes is relevant, so precision is 0`;
  const terms = relevant.map((n) => n.precision_at_k.toFixed(2)).join(' + ');
  const ranks = relevant.map((n) => n.rank).join(', ');
  return `relevant at rank${relevant.length > 1 ? 's' : ''} ${ranks} of ${group.total}; (1/${relevant.length}) * (${terms}) = ${formatScore(group.score)}`;
}

function scoreGroups(groups, perToolCall, how) {
  const hits = [];
  const misses = [];
  const details = [];
  const scored = [];
  for (const group of groups) {
    const flags = group.verdicts.map((v) => Boolean(v.ok));
    const ap = averagePrecision(flags);
    const atK = precisionAtK(flags);
    scored.push([ap, group.nodes.length]);
    const prefix = perToolCall ? (group.query ? `[${group.label}: ${group.query}] ` : `[${group.label}] `) : '';
    const nodes = group.nodes.map((text, i) => {
      const v = group.verdicts[i];
      const rank = i + 1;
      const label = `${prefix}#${rank} ${snippet(text)}`;
      if (v.ok) hits.push(`${label} (relevant; precision@${rank} = ${atK[i].toFixed(2)})`);
      else misses.push(`${label} (not relevant)`);
      return { rank, text, relevant: Boolean(v.ok), precision_at_k: Math.round(atK[i] * 1e6) / 1e6, reason: v.reason, confidence: v.confidence };
    });
    details.push({ label: group.label, tool: group.tool, query: group.query, score: ap, relevant: flags.filter(Boolean).length, total: flags.length, nodes });
  }
  const score = perToolCall ? aggregate(scored, how) : scored[0][0];
  let reason;
  if (perToolCall) {
    const parts = details.filter((g) => g.total).map((g) => `${g.label}: ${describe(g)}`);
    reason = `${parts.join('; ')}. ${how[0].toUpperCase() + how.slice(1)} over tool calls: ${formatScore(score)}.`;
  } else {
    const text = describe(details[0]);
    reason = text[0].toUpperCase() + text.slice(1) + '.';
  }
  const out = {
    mode: perToolCall ? 'per_tool_call' : 'flat',
    aggregate: perToolCall ? how : null,
    relevant: details.reduce((s, g) => s + g.relevant, 0),
    total: details.reduce((s, g) => s + g.total, 0),
    groups: details,
    // per-item verdicts in the shape of a case's `labels:` (docs/judges.md)
    verdicts: { relevant: details.flatMap((g) => g.nodes.map((n) => n.relevant)) },
  };
  if (!perToolCall) out.nodes = details[0].nodes;
  return { score, reason, hits, misses, details: out };
}

await defineScriptGrader(async (input) => {
  const config = input.config;
  const perToolCall = Boolean(config.per_tool_call ?? false);
  const how = String(config.aggregate ?? 'weighted');
  if (!AGGREGATES.includes(how)) throw new Error(`config.aggregate must be one of ${AGGREGATES.join(', ')}, not '${how}'`);
  const mode = config.mode ?? 'batched';
  if (!MODES.includes(mode)) throw new Error(`config.mode must be one of ${MODES.join(', ')}, not ${pyRepr(mode)}`);
  const retrieved = config.retrieval_context !== undefined && config.retrieval_context !== null;
  if (!retrieved && !input.toolCallResults().length) {
    throw new Abstain(
      'the case has no retrieval context: give `config.retrieval_context` or expected tool calls ' +
        'whose results are the retrieved passages',
    );
  }
  const groups = retrievalGroups(input, perToolCall).filter((g) => g.nodes.length);
  const total = groups.reduce((s, g) => s + g.nodes.length, 0);
  if (total === 0) {
    return {
      score: 0,
      reason: 'The retrieval context is empty, so there is nothing relevant to rank: score 0.',
      hits: [],
      misses: [],
      details: { mode: perToolCall ? 'per_tool_call' : 'flat', total: 0, groups: [] },
    };
  }
  const question = input.question.trim();
  if (!question) throw new Abstain('no question to judge relevance against (the input has no user message)');

  const expected = config.include_expected ?? true ? input.expectedText() : null;
  if (mode === 'batched') await judgeLists(input, groups, question, expected, config.judge_target ?? null);
  else await judgeNodes(input, groups, question, expected, config.judge_target ?? undefined, total);
  return scoreGroups(groups, perToolCall, how);
});

// Batched mode: one judge call per ranked list, every node numbered in it.
async function judgeLists(input, groups, question, expected, target) {
  const work = `judging ${groups.length} ranked list${groups.length > 1 ? 's' : ''} in batched mode`;
  if (input.maxCalls !== null) checkBudget(0, input.maxCalls, 1, groups.length, work);
  const client = createTargetClient();
  let left = groups.length;
  for (const group of groups) {
    const request = relevanceBatchRequest(question, group.nodes, expected, target);
    let reading;
    try {
      [reading] = await judgeReplies(client, [request], (raw) => readNumbered(raw, group.nodes.length));
    } catch (err) {
      if (err instanceof BudgetExceeded) budgetRefused(err, left, 1, work);
      if (err instanceof ProtocolError) throw new Abstain(`the judge did not answer the batched request: ${err.message}`);
      throw err;
    }
    if (!reading.ok) {
      throw new Abstain(`the judge's batched verdicts for ${group.label} could not be read (${reading.explain()})`, { raw: [reading.raw] });
    }
    group.verdicts = reading.value;
    checkVerdicts(group);
    left -= 1;
  }
}

// Per-item mode: one judge call per node, one batch per ranked list.
async function judgeNodes(input, groups, question, expected, target, total) {
  const work = `judging ${total} retrieved nodes`;
  // the grant is fresh; a judge panel's cost shows in a refusal
  if (input.maxCalls !== null) checkBudget(0, input.maxCalls, 1, total, work);
  const client = createTargetClient();
  let left = total;
  for (const group of groups) {
    try {
      group.verdicts = await judgeRelevance(client, question, group.nodes, { expected, target });
    } catch (err) {
      if (err instanceof BudgetExceeded) budgetRefused(err, left, group.nodes.length, left === total ? work : `judging the ${left} retrieved nodes left`);
      if (err instanceof ProtocolError) throw new Abstain(`the judge did not answer once per node: ${err.message}`);
      throw err;
    }
    left -= group.nodes.length;
    checkVerdicts(group);
  }
}

// Abstain unless the judge gave one readable verdict for each node of the group.
function checkVerdicts(group) {
  if (group.verdicts.length !== group.nodes.length) {
    throw new Abstain(`the judge returned ${group.verdicts.length} verdicts for ${group.nodes.length} nodes`);
  }
  const unreadable = group.verdicts.map((v, i) => (v.ok === null ? i + 1 : 0)).filter(Boolean);
  if (unreadable.length) {
    const why = unreadable.slice(0, 3).map((i) => `node ${i}: ${group.verdicts[i - 1].reason}`).join('; ');
    throw new Abstain(
      `the judge's reply for node(s) ${unreadable.join(', ')} of ${group.label} could not be read (${why})`,
      { raw: unreadable.map((i) => group.verdicts[i - 1].raw) },
    );
  }
}
