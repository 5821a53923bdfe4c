// make sdk-test's client side (scripts/sdk-test.sh starts the server): the
// official openai client and the AI SDK against a real cloisond serving the
// context-bag model with Qwen 2.5's template. Each check asserts what the
// API promises; the script exits 1 if any fails.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, generateObject, tool, embed, embedMany } from "ai";
import { z } from "zod";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";

const baseURL = process.env.CLOISON_URL + "/v1";
const model = process.env.CLOISON_MODEL;
const client = new OpenAI({ baseURL, apiKey: process.env.CLOISON_TOKEN, maxRetries: 0 });
const otherClient = new OpenAI({ baseURL, apiKey: process.env.CLOISON_OTHER_TOKEN, maxRetries: 0 });
const provider = createOpenAI({ baseURL, apiKey: process.env.CLOISON_TOKEN });

const unitTool = {
  type: "function",
  function: {
    name: "set_unit",
    description: "The unit of temperatures",
    parameters: { type: "object", properties: { unit: { enum: ["celsius", "fahrenheit"] } }, required: ["unit"], additionalProperties: false },
  },
};
const unitArgs = (s) => {
  const a = JSON.parse(s);
  assert.ok(a.unit === "celsius" || a.unit === "fahrenheit", `arguments ${s} do not match the schema`);
  return a;
};

let failed = 0;
async function check(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
async function status(p) {
  try {
    await p;
  } catch (e) {
    return e.status;
  }
  return 200;
}

// ---- the openai client: chat completions, completions, models
await check("openai: models.list", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  assert.equal((await client.models.retrieve(model)).id, model);
});
await check("openai: chat.completions.create", async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Bonjour" }], max_tokens: 8, temperature: 0 });
  assert.equal(r.object, "chat.completion");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.usage.completion_tokens, 8);
  assert.equal(r.choices[0].finish_reason, "length");
});
await check("openai: the Cloison-Receipt header rides along", async () => {
  const { data, response } = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Bonjour" }], max_tokens: 2 }).withResponse();
  assert.equal(data.object, "chat.completion");
  assert.match(response.headers.get("cloison-receipt") ?? "", /^[A-Za-z0-9+/]+=*$/);
});
await check("openai: chat streaming with usage", async () => {
  const whole = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Bonjour" }], max_tokens: 8, temperature: 0 });
  const stream = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Bonjour" }], max_tokens: 8, temperature: 0,
    stream: true, stream_options: { include_usage: true } });
  let text = "", usage, finish;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.delta.content ?? "";
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 8);
});
await check("openai: tools, tool_choice required, streamed delta.tool_calls", async () => {
  const stream = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Set it up." }], max_tokens: 120, temperature: 0,
    tools: [unitTool], tool_choice: "required", stream: true });
  const calls = [];
  let finish;
  for await (const c of stream) {
    for (const ch of c.choices) {
      finish = ch.finish_reason ?? finish;
      for (const d of ch.delta.tool_calls ?? []) {
        calls[d.index] ??= { id: "", name: "", arguments: "" };
        if (d.id) calls[d.index].id = d.id;
        if (d.function?.name) calls[d.index].name += d.function.name;
        calls[d.index].arguments += d.function?.arguments ?? "";
      }
    }
  }
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "set_unit");
  assert.match(calls[0].id, /^call_/);
  unitArgs(calls[0].arguments);
  assert.equal(finish, "tool_calls");
});
await check("openai: named tool_choice, then the tool result", async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Set it up." }], max_tokens: 120, temperature: 0,
    tools: [unitTool], tool_choice: { type: "function", function: { name: "set_unit" } } });
  const tc = r.choices[0].message.tool_calls;
  assert.equal(tc.length, 1);
  unitArgs(tc[0].function.arguments);
  const next = await client.chat.completions.create({ model, max_tokens: 4, tools: [unitTool], messages: [{ role: "user", content: "Set it up." },
    r.choices[0].message, { role: "tool", tool_call_id: tc[0].id, content: "done" }] });
  assert.equal(next.object, "chat.completion");
});
await check("openai: response_format json_schema", async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "A city?" }], max_tokens: 120, temperature: 0,
    response_format: { type: "json_schema", json_schema: { name: "city", strict: true,
      schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false } } } });
  assert.equal(typeof JSON.parse(r.choices[0].message.content).ok, "boolean");
});
await check("openai: chat logprobs", async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Bonjour" }], max_tokens: 4, logprobs: true, top_logprobs: 2 });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, r.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0 && Array.isArray(t.bytes) && t.top_logprobs.length === 2);
  }
});
await check("openai: completions with logprobs", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 4, logprobs: 1, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].logprobs.tokens.length, r.usage.completion_tokens);
});
await check("openai: an unimplemented field is refused (400)", async () => {
  assert.equal(await status(client.chat.completions.create({ model, messages: [{ role: "user", content: "x" }], audio: { voice: "alloy", format: "wav" } })), 400);
});

// ---- the openai client: the Responses API
await check("openai: responses.create", async () => {
  const r = await client.responses.create({ model, input: "Bonjour", instructions: "be brief", max_output_tokens: 8, temperature: 0 });
  assert.equal(r.object, "response");
  assert.equal(r.status, "incomplete");
  assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(r.store, false);
  assert.equal(r.output[0].type, "message");
  assert.equal(typeof r.output_text, "string");
  assert.ok(r.output_text.length > 0);
  assert.equal(r.usage.output_tokens, 8);
  assert.equal(await status(client.responses.retrieve(r.id)), 404); // not stored
});
await check("openai: responses streaming events", async () => {
  const whole = await client.responses.create({ model, input: "Bonjour", max_output_tokens: 8, temperature: 0 });
  const stream = await client.responses.create({ model, input: "Bonjour", max_output_tokens: 8, temperature: 0, stream: true });
  let text = "", last, seq = -1;
  const types = new Set();
  for await (const e of stream) {
    assert.equal(e.sequence_number, seq + 1);
    seq = e.sequence_number;
    types.add(e.type);
    if (e.type === "response.output_text.delta") text += e.delta;
    last = e;
  }
  for (const t of ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.done", "response.output_item.done"]) assert.ok(types.has(t), `no ${t} event`);
  assert.equal(last.type, "response.incomplete");
  assert.equal(text, whole.output_text);
});
await check("openai: responses with a forced function call", async () => {
  const t = { type: "function", name: "set_unit", description: "The unit", parameters: unitTool.function.parameters, strict: false };
  const r = await client.responses.create({ model, input: "Set it up.", max_output_tokens: 120, temperature: 0, tools: [t], tool_choice: "required" });
  const fc = r.output.filter((o) => o.type === "function_call");
  assert.equal(fc.length, 1);
  assert.equal(fc[0].name, "set_unit");
  unitArgs(fc[0].arguments);
  const next = await client.responses.create({ model, max_output_tokens: 4, tools: [t], input: [{ role: "user", content: "Set it up." },
    { type: "function_call", call_id: fc[0].call_id, name: "set_unit", arguments: fc[0].arguments },
    { type: "function_call_output", call_id: fc[0].call_id, output: "done" }] });
  assert.equal(next.object, "response");
});
await check("openai: responses store, retrieve, previous_response_id, delete; other tenant 404", async () => {
  const r = await client.responses.create({ model, input: "Remember zanzibar", max_output_tokens: 6, temperature: 0, store: true });
  assert.equal(r.store, true);
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output_text ?? got.output[0].content[0].text, r.output_text);
  assert.equal(await status(otherClient.responses.retrieve(r.id)), 404);
  assert.equal(await status(otherClient.responses.delete(r.id)), 404);
  assert.equal(await status(otherClient.responses.create({ model, input: "x", previous_response_id: r.id })), 404);
  const fresh = await client.responses.create({ model, input: "and then?", max_output_tokens: 2 });
  const follow = await client.responses.create({ model, input: "and then?", max_output_tokens: 2, previous_response_id: r.id, store: true });
  assert.ok(follow.usage.input_tokens > fresh.usage.input_tokens + r.usage.output_tokens, "the previous response's conversation is missing");
  // input_items: newest first, the previous turns included, not the output.
  const items = await client.responses.inputItems.list(follow.id);
  assert.deepEqual(items.data.map(it => it.content[0].text), ["and then?", r.output_text, "Remember zanzibar"]);
  const asc = await client.responses.inputItems.list(follow.id, { order: "asc", limit: 1 });
  assert.equal(asc.data.length, 1);
  assert.equal(asc.data[0].content[0].text, "Remember zanzibar");
  assert.equal(await status(otherClient.responses.inputItems.list(follow.id)), 404);
  await client.responses.delete(follow.id);
  await client.responses.delete(r.id);
  assert.equal(await status(client.responses.retrieve(r.id)), 404);
});
await check("openai: responses logprobs (include, top_logprobs)", async () => {
  const r = await client.responses.create({ model, input: "Bonjour", max_output_tokens: 4, temperature: 0,
    include: ["message.output_text.logprobs"], top_logprobs: 2 });
  const lps = r.output[0].content[0].logprobs;
  assert.equal(lps.length, r.usage.output_tokens);
  for (const lp of lps) {
    assert.equal(typeof lp.logprob, "number");
    assert.equal(lp.top_logprobs.length, 2);
    assert.ok(Array.isArray(lp.bytes));
  }
});
await check("openai: completions echo with logprobs scores the prompt (max_tokens 0)", async () => {
  const r = await client.completions.create({ model, prompt: "the cat sat", echo: true, logprobs: 1, max_tokens: 0 });
  const lp = r.choices[0].logprobs;
  assert.equal(r.choices[0].text, "the cat sat");
  assert.equal(lp.tokens.length, r.usage.prompt_tokens);
  assert.equal(lp.token_logprobs[0], null);
  assert.ok(lp.token_logprobs.slice(1).every(x => typeof x === "number" && x <= 0));
  assert.equal(r.usage.completion_tokens, 0);
});
await check("openai: responses refuse what they do not implement (400)", async () => {
  assert.equal(await status(client.responses.create({ model, input: "x", reasoning: { effort: "high" } })), 400);
  assert.equal(await status(client.responses.create({ model, input: "x", tools: [{ type: "web_search" }] })), 400);
  assert.equal(await status(client.responses.create({ model, input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x" }] }] })), 400);
});

// ---- the AI SDK: the default provider (Responses API) and .chat()
for (const [name, m] of [["openai(model) (Responses)", provider(model)], ["openai.chat(model)", provider.chat(model)]]) {
  await check(`ai: generateText + streamText, ${name}`, async () => {
    const g = await generateText({ model: m, prompt: "Bonjour", maxOutputTokens: 8, temperature: 0 });
    assert.ok(g.text.length > 0);
    assert.equal(g.usage.outputTokens, 8);
    assert.equal(g.finishReason, "length");
    const s = streamText({ model: m, prompt: "Bonjour", maxOutputTokens: 8, temperature: 0 });
    let text = "";
    for await (const d of s.textStream) text += d;
    assert.equal(text, g.text);
    assert.equal((await s.usage).outputTokens, 8);
  });
  await check(`ai: generateObject, ${name}`, async () => {
    const { object } = await generateObject({ model: m, schema: z.object({ unit: z.enum(["celsius", "fahrenheit"]) }), prompt: "Which unit?",
      maxOutputTokens: 120, temperature: 0 });
    assert.ok(object.unit === "celsius" || object.unit === "fahrenheit");
  });
  await check(`ai: tools with toolChoice required, ${name}`, async () => {
    const g = await generateText({ model: m, prompt: "Set it up.", maxOutputTokens: 120, temperature: 0, toolChoice: "required",
      tools: { set_unit: tool({ description: "The unit", inputSchema: z.object({ unit: z.enum(["celsius", "fahrenheit"]) }) }) } });
    assert.equal(g.toolCalls.length, 1);
    assert.equal(g.toolCalls[0].toolName, "set_unit");
    assert.ok(["celsius", "fahrenheit"].includes(g.toolCalls[0].input.unit));
  });
}

// ---- LangChain: ChatOpenAI on chat completions and on the Responses API
for (const useResponsesApi of [false, true]) {
  const lc = new ChatOpenAI({ model, apiKey: process.env.CLOISON_TOKEN, configuration: { baseURL }, maxTokens: 8, temperature: 0, maxRetries: 0, useResponsesApi });
  const api = useResponsesApi ? "Responses" : "chat";
  await check(`langchain: invoke + stream (${api})`, async () => {
    const m = await lc.invoke("Bonjour");
    assert.equal(typeof m.content === "string" ? m.content.length > 0 : m.content.length > 0, true);
    let text = "";
    for await (const c of await lc.stream("Bonjour")) text += typeof c.content === "string" ? c.content : c.content.map((p) => p.text ?? "").join("");
    assert.equal(text, typeof m.content === "string" ? m.content : m.text);
  });
  // @langchain/openai 0.6.17 does not send tool_choice to the Responses
  // API (its request has tools only), so a forced call is checked on chat.
  if (useResponsesApi) continue;
  await check(`langchain: bindTools with tool_choice required (${api})`, async () => {
    const withTools = new ChatOpenAI({ model, apiKey: process.env.CLOISON_TOKEN, configuration: { baseURL }, maxTokens: 120, temperature: 0, maxRetries: 0, useResponsesApi })
      .bindTools([unitTool], { tool_choice: "required" });
    const m = await withTools.invoke("Set it up.");
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].name, "set_unit");
    assert.ok(["celsius", "fahrenheit"].includes(m.tool_calls[0].args.unit));
  });
}

console.log(failed ? `sdk-test: ${failed} check(s) failed` : "sdk-test: every check passed");
// ---- embeddings: the openai client, the AI SDK and LangChain (the model declares mean pooling)
const unit = (v) => Math.abs(Math.hypot(...v) - 1) < 1e-5;
const close = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) < 1e-6);
let catVector;
await check("openai: embeddings.create", async () => {
  // The client asks for base64 by default and decodes it itself.
  const r = await client.embeddings.create({ model, input: ["the cat sat", "the dog ran"] });
  assert.equal(r.data.length, 2);
  assert.ok(r.data.every((d, i) => d.index === i && unit(d.embedding)), "unit vectors in order");
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.prompt_tokens === r.usage.total_tokens);
  const alone = await client.embeddings.create({ model, input: "the cat sat", encoding_format: "float" });
  assert.ok(close(alone.data[0].embedding, r.data[0].embedding), "the same input alone, as floats, gives the same vector");
  catVector = alone.data[0].embedding;
  const d = catVector.length - 16;
  const cut = await client.embeddings.create({ model, input: "the cat sat", dimensions: d });
  assert.equal(cut.data[0].embedding.length, d);
  assert.ok(unit(cut.data[0].embedding));
  assert.equal(await status(client.embeddings.create({ model, input: [] })), 400);
});
await check("ai: embed, embedMany", async () => {
  const { embedding } = await embed({ model: provider.embedding(model), value: "the cat sat" });
  assert.ok(close(embedding, catVector));
  const { embeddings } = await embedMany({ model: provider.embedding(model), values: ["the dog ran", "the cat sat"] });
  assert.equal(embeddings.length, 2);
  assert.ok(close(embeddings[1], catVector));
});
await check("langchain: OpenAIEmbeddings", async () => {
  const e = new OpenAIEmbeddings({ model, apiKey: process.env.CLOISON_TOKEN, configuration: { baseURL }, maxRetries: 0 });
  assert.ok(close(await e.embedQuery("the cat sat"), catVector));
  const docs = await e.embedDocuments(["the dog ran", "the cat sat"]);
  assert.equal(docs.length, 2);
  assert.ok(close(docs[1], catVector));
});

process.exit(failed ? 1 : 0);
