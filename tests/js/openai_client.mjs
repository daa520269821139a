// The `openai` npm package against the judge proxy, as a grader written in JS would use it.
// argv[2]: {url, tokens: {plain, tools, stream, budget}}. Prints one JSON object of findings;
// tests/test_openai_npm.py makes the assertions.
import OpenAI from "openai";

const { url, tokens } = JSON.parse(process.argv[2]);
const question = [{ role: "user", content: "What is the weather in Paris?" }];
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather of a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};

function client(token) {
  const counted = { requests: 0 };
  // default retries (maxRetries 2): the proxy's answers must make them unnecessary
  const api = new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: token,
    fetch: (input, init) => {
      counted.requests += 1;
      return fetch(input, init);
    },
  });
  return { api, counted };
}

async function failure(call) {
  try {
    await call();
    return { thrown: null };
  } catch (error) {
    return {
      thrown: error.constructor.name,
      authentication: error instanceof OpenAI.AuthenticationError,
      rateLimit: error instanceof OpenAI.RateLimitError,
      badRequest: error instanceof OpenAI.BadRequestError,
      message: error.message,
      status: error.status,
      code: error.code ?? null,
      type: error.type ?? null,
      shouldRetry: error.headers?.get?.("x-should-retry") ?? null,
      retryAfter: error.headers?.get?.("retry-after") ?? null,
    };
  }
}

const out = {};

{
  const { api } = client(tokens.plain);
  const plain = await api.chat.completions.create({ model: "gpt", messages: question });
  out.plain = plain.choices[0].message.content;
  const schema = await api.chat.completions.create({
    model: "gpt",
    messages: question,
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "verdict",
        strict: true,
        schema: {
          type: "object",
          properties: { verdict: { type: "string" }, confidence: { type: "number" } },
          required: ["verdict", "confidence"],
          additionalProperties: false,
        },
      },
    },
  });
  out.jsonSchema = JSON.parse(schema.choices[0].message.content);
  out.models = (await api.models.list()).data.map((m) => m.id).sort();
  const model = await api.models.retrieve("claude");
  out.retrieved = { id: model.id, object: model.object };
}

{
  const { api } = client(tokens.tools);
  out.tools = {};
  for (const model of ["gpt", "claude", "gem"]) {
    const first = await api.chat.completions.create({ model, messages: question, tools: [weather] });
    const message = first.choices[0].message;
    const call = message.tool_calls[0];
    const second = await api.chat.completions.create({
      model,
      tools: [weather],
      messages: [
        ...question,
        message,
        { role: "tool", tool_call_id: call.id, content: '{"city": "Paris", "sky": "sunny", "celsius": 21}' },
      ],
    });
    out.tools[model] = {
      finish: first.choices[0].finish_reason,
      name: call.function.name,
      args: JSON.parse(call.function.arguments),
      answer: second.choices[0].message.content,
    };
  }
  out.noTools = await failure(() =>
    api.chat.completions.create({ model: "mock", messages: question, tools: [weather] }),
  );
}

{
  const { api } = client(tokens.stream);
  const stream = await api.chat.completions.create({
    model: "gpt",
    messages: question,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  let finish = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage.total_tokens;
  }
  out.stream = { text, usage, finish };
}

{
  const { api, counted } = client("not-a-token");
  out.badToken = { ...(await failure(() => api.models.list())), requests: counted.requests };
}

{
  const { api, counted } = client(tokens.budget);
  await api.chat.completions.create({ model: "gpt", messages: question });
  const spent = await failure(() => api.chat.completions.create({ model: "gpt", messages: question }));
  out.budget = { ...spent, requests: counted.requests };
}

console.log(JSON.stringify(out));
