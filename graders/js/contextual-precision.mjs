// Contextual precision on the JS SDK: the same metric, config and output as
// graders/contextual_precision.py. Run: node graders/js/contextual-precision.mjs < payload.json
//
// score = (1/R) * sum_k precision@k * r_k over the ranked nodes; 0 when no node is relevant.

import {
  Abstain,
  BudgetExceeded,
  configuredContext,
  createTargetClient,
  defineScriptGrader,
  judgeRelevance,
  ProtocolError,
} from '../../grader_sdk/js/index.mjs';

const AGGREGATES = ['weighted', 'mean'];

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
  // this grader judges per item; batched mode, the Python grader's default, is the Python
  // grader's only (docs/contextual-precision.md, "Judge modes")
  const mode = String(config.mode ?? 'per-item');
  if (mode !== 'per-item') {
    throw new Error(`config.mode '${mode}': this JavaScript grader judges per item only; use graders.contextual_precision for batched`);
  }
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

  const work = `judging ${total} retrieved nodes`;
  // the grant is fresh; a judge panel's cost shows in a refusal
  if (input.maxCalls !== null) checkBudget(0, input.maxCalls, 1, total, work);
  const client = createTargetClient();
  const expected = config.include_expected ?? true ? input.expectedText() : null;
  let left = total;
  for (const group of groups) {
    try {
      group.verdicts = await judgeRelevance(client, question, group.nodes, { expected, target: config.judge_target ?? undefined });
    } catch (err) {
      if (err instanceof BudgetExceeded) budgetRefused(err, left, group.nodes.length, left === total ? work : `judging the ${left} retrieved nodes left`);
      if (err instanceof ProtocolError) throw new Abstain(`the judge did not answer once per node: ${err.message}`);
      throw err;
    }
    left -= group.nodes.length;
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
  return scoreGroups(groups, perToolCall, how);
});
