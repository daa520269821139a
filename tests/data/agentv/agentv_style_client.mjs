// A judge client that talks to the proxy the way AgentV's SDKs do (written for evalrun's tests):
// the URL and token from AGENTV_PROVIDER_PROXY_* (current SDK) or AGENTV_TARGET_PROXY_* (4.x),
// the selector as `provider` or `target`, bookkeeping keys evalCaseId/attempt, and on an error
// the message read from the body's `error` string, else "HTTP <status>".
//
//   node agentv_style_client.mjs current|4x '<request JSON>' [invoke|invokeBatch|info]
// prints {"ok": true, "body": ...} or {"ok": false, "status": N, "message": "..."}.

const [generation, requestJson = '{}', route = 'invoke'] = process.argv.slice(2);
const prefix = generation === '4x' ? 'AGENTV_TARGET_PROXY' : 'AGENTV_PROVIDER_PROXY';
const url = process.env[`${prefix}_URL`];
const token = process.env[`${prefix}_TOKEN`];
if (!url || !token) {
  console.log(JSON.stringify({ ok: false, status: 0, message: `${prefix}_URL/_TOKEN not set` }));
  process.exit(0);
}
const selector = generation === '4x' ? 'target' : 'provider';
const asWire = (r) => ({
  question: r.question,
  systemPrompt: r.systemPrompt,
  evalCaseId: r.evalCaseId ?? 'case-1',
  attempt: r.attempt ?? 1,
  [selector]: r.name,
});
const request = JSON.parse(requestJson);
const init = { headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` } };
let response;
if (route === 'info') {
  response = await fetch(`${url}/info`, init);
} else {
  const body = route === 'invokeBatch' ? { requests: request.requests.map(asWire) } : asWire(request);
  response = await fetch(`${url}/${route}`, { ...init, method: 'POST', body: JSON.stringify(body) });
}
const text = await response.text();
if (!response.ok) {
  let message;
  try {
    message = JSON.parse(text).error ?? `HTTP ${response.status}`;
  } catch {
    message = text || `HTTP ${response.status}`;
  }
  console.log(JSON.stringify({ ok: false, status: response.status, message: `${message}` }));
} else {
  console.log(JSON.stringify({ ok: true, body: JSON.parse(text) }));
}
