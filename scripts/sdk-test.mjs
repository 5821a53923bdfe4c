// make sdk-test's client side (scripts/sdk-test.sh starts the server): the
// official openai client and the AI SDK against a real cloisond serving the
// context-bag model with Qwen 2.5's template: chat, completions, the
// Responses API, tools, common zod shapes as structured output, vLLM's
// extension fields and embeddings. Each check asserts what the API
// promises; the script exits 1 if any fails.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, generateObject, tool, embed, embedMany } from "ai";
import { z } from "zod";
import { z as zv3 } from "zod/v3";
import { zodResponseFormat } from "openai/helpers/zod";
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

// ---- zod shapes: the schemas users write, through the AI SDK's
// generateObject, openai's chat.completions.parse (zodResponseFormat) and
// LangChain's withStructuredOutput. The model's weights are random: only
// the grammar makes its output a member of the schema, which the zod
// schema itself then checks. @langchain/core 0.3.80 turns a zod 4 schema
// into JSON Schema without its checks (no pattern, format, bounds, int),
// so LangChain is given the same shapes written with zod/v3, which it
// converts whole.
const mkShapes = (z) => [
  ["int", z.object({ n: z.number().int() })],
  ["number min max", z.object({ x: z.number().min(-2).max(10) })],
  ["number fractional bounds", z.object({ x: z.number().min(-2.5).max(10) })],
  ["email", z.object({ email: z.string().email() })],
  ["uuid", z.object({ id: z.string().uuid() })],
  ["datetime", z.object({ at: z.string().datetime({ offset: true }) })],
  ["regex", z.object({ code: z.string().regex(/^[A-Z]{3}-\d{2}$/) })],
  ["union", z.object({ v: z.union([z.object({ a: z.number().int() }), z.object({ b: z.boolean() })]) })],
  ["discriminatedUnion", z.object({ shape: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("circle"), r: z.number().min(0).max(100) }),
    z.object({ kind: z.literal("square"), side: z.number().int().min(1).max(9) })]) })],
  ["tuple", z.object({ t: z.tuple([z.enum(["x", "y"]), z.number().int().min(0).max(99), z.boolean()]) })],
  ["array min max", z.object({ flags: z.array(z.boolean()).min(2).max(4) })],
  ["enum", z.object({ unit: z.enum(["celsius", "fahrenheit", "kelvin"]) })],
  ["optional nullable", z.object({ a: z.boolean().optional(), b: z.number().int().nullable(), c: z.enum(["p", "q"]).nullable().optional() })],
  ["nested", z.object({ outer: z.object({ inner: z.object({ ok: z.boolean(), k: z.enum(["m", "n"]) }), n: z.number().int().min(0).max(5) }) })],
  ["record", z.object({ scores: z.record(z.string(), z.number().int().min(0).max(9)) })],
];
// What is refused today, asserted exactly so that the check fails loudly
// the day it changes. Everything else is served and its answer checked by
// the zod schema itself: zod 4's email, uuid and datetime, which emit
// format beside pattern, get strings that satisfy both (the grammar
// compiles the intersection); fractional number bounds and tuples are
// served; zod 4's z.record, whose propertyNames {"type": "string"} is
// compiled, is served but cut by max_tokens as zod 3's is. server: a 400
// naming the keyword and its place. client: the openai client's own
// strict Structured Outputs rules (LangChain's copy of them too), refused
// before any request is sent.
const zodRefused = {
  "tuple/openai": { client: "Schema at `properties/t` uses tuple-form `items`, which cannot be represented in strict Structured Outputs." },
  "optional nullable/openai": { client: "Schema field at `properties/a` uses `.optional()` without `.nullable()` which is not supported by the API." },
  "optional nullable/langchain": { client: "Zod field at `#/definitions/shape/properties/a` uses `.optional()` without `.nullable()` which is not supported by the API." },
  // Accepted: zod/v3 emits additionalProperties alone, which is compiled;
  // but the random weights write a key of spaces until max_tokens, so
  // LangChain gets a 200 cut by length and says so.
  "record/langchain": { length: "Could not parse response content as the length limit was reached" },
  "record/ai": { length: "No object generated: could not parse the response." },
  "record/openai": { client: "Object schema at `properties/scores` must set `additionalProperties: false` to be compatible with strict Structured Outputs." },
};
async function zodCheck(name, client, fn) {
  const want = zodRefused[`${name}/${client}`];
  await check(`zod ${name}: ${client}${want ? (want.server ? " (refused by the server, 400)" : want.client ? " (refused by the client)" : " (accepted, cut by max_tokens)") : ""}`, async () => {
    if (!want) return fn();
    let err;
    try {
      await fn();
    } catch (e) {
      err = e;
    }
    assert.ok(err, "expected a refusal, got an answer");
    const msg = err.message ?? String(err);
    if (want.length) {
      assert.ok(msg.includes(want.length), `${msg} is not the length cut`);
      if (err.finishReason !== undefined) assert.equal(err.finishReason, "length", String(err));
    } else if (want.server) {
      assert.equal(err.status ?? err.statusCode, 400, String(err));
      assert.ok(msg.includes(want.server), `${msg} is not the refusal ${want.server}`);
    } else {
      assert.equal(err.status ?? err.statusCode, undefined, `the client sent it: ${err}`);
      assert.ok(msg.includes(want.client), `${msg} is not the client's refusal ${want.client}`);
    }
  });
}
const objTokens = 600;
const chatModel = provider.chat(model);
const shapesV3 = mkShapes(zv3);
for (const [i, [name, schema]] of mkShapes(z).entries()) {
  await zodCheck(name, "ai", async () => {
    const { object } = await generateObject({ model: chatModel, schema, prompt: "Fill it in.", maxOutputTokens: objTokens, temperature: 0, seed: 7 });
    schema.parse(object);
  });
  await zodCheck(name, "openai", async () => {
    const r = await client.chat.completions.parse({ model, messages: [{ role: "user", content: "Fill it in." }], max_tokens: objTokens, temperature: 0, seed: 7,
      response_format: zodResponseFormat(schema, "shape") });
    assert.equal(r.choices[0].finish_reason, "stop", `finished by ${r.choices[0].finish_reason}: ${r.choices[0].message.content}`);
    schema.parse(r.choices[0].message.parsed);
  });
  await zodCheck(name, "langchain", async () => {
    const v3 = shapesV3[i][1];
    const lc = new ChatOpenAI({ model, apiKey: process.env.CLOISON_TOKEN, configuration: { baseURL }, maxTokens: objTokens, temperature: 0, maxRetries: 0 });
    const out = await lc.withStructuredOutput(v3, { name: "shape", method: "jsonSchema", strict: true }).invoke("Fill it in.");
    v3.parse(out);
  });
}

// ---- vLLM's extension fields, as a vLLM client sends them (extra keys in
// the openai client's body), with vLLM's semantics asserted on the answer.
const say = [{ role: "user", content: "Bonjour" }];
await check("vllm: ignore_eos generates to max_tokens", async () => {
  const r = await client.chat.completions.create({ model, messages: say, max_tokens: 24, temperature: 0, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 24);
  assert.equal(r.choices[0].finish_reason, "length");
});
await check("vllm: stop_token_ids end the completion; min_tokens holds them off", async () => {
  const ids = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0, logprobs: 0, return_tokens_as_token_ids: true });
  const toks = ids.choices[0].logprobs.tokens.map((t) => Number(t.replace(/^token_id:/, "")));
  assert.equal(toks.length, 8);
  const stopId = toks[2];
  const first = toks.indexOf(stopId);
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0, stop_token_ids: [stopId] });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(r.usage.completion_tokens <= first + 1, `${r.usage.completion_tokens} tokens, the stop id ${stopId} first at ${first}`);
  const held = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8, temperature: 0, stop_token_ids: [stopId], min_tokens: 6 });
  assert.ok(held.usage.completion_tokens >= 6, `min_tokens 6 gave ${held.usage.completion_tokens} tokens`);
});
await check("vllm: structured_outputs.regex and guided_regex match the whole output", async () => {
  const re = "[a-z]{3}-[0-9]{2}";
  const a = await client.chat.completions.create({ model, messages: say, max_tokens: 40, temperature: 0, structured_outputs: { regex: re } });
  assert.match(a.choices[0].message.content, new RegExp(`^${re}$`));
  const b = await client.completions.create({ model, prompt: "Code:", max_tokens: 40, temperature: 0.9, seed: 3, guided_regex: re });
  assert.match(b.choices[0].text, new RegExp(`^${re}$`));
});
await check("vllm: guided_choice answers one of the choices", async () => {
  const choices = ["red", "green", "blue"];
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({ model, messages: say, max_tokens: 10, temperature: 1, seed, guided_choice: choices });
    assert.ok(choices.includes(r.choices[0].message.content), `${JSON.stringify(r.choices[0].message.content)} is not a choice`);
  }
});
await check("vllm: cache_salt narrows caching only (same answer); bad salts refused", async () => {
  const plain = await client.chat.completions.create({ model, messages: say, max_tokens: 8, temperature: 0 });
  for (const salt of ["s1", "s1", "s2"]) {
    const r = await client.chat.completions.create({ model, messages: say, max_tokens: 8, temperature: 0, cache_salt: salt });
    assert.equal(r.choices[0].message.content, plain.choices[0].message.content);
  }
  assert.equal(await status(client.chat.completions.create({ model, messages: say, max_tokens: 2, cache_salt: "" })), 400);
});
const checkPromptLogprobs = (pl, n, k) => {
  assert.equal(pl.length, n);
  assert.equal(pl[0], null);
  for (const pos of pl.slice(1)) {
    const entries = Object.entries(pos);
    assert.ok(entries.length >= k && entries.length <= k + 1, `${entries.length} entries for k=${k}`);
    const ranks = [];
    for (const [id, e] of entries) {
      assert.match(id, /^\d+$/);
      assert.ok(typeof e.logprob === "number" && e.logprob <= 0);
      assert.equal(typeof e.decoded_token, "string");
      if (e.rank !== null) ranks.push(e.rank);
    }
    assert.deepEqual(ranks.sort((x, y) => x - y), Array.from({ length: k }, (_, i) => i + 1));
  }
};
await check("vllm: prompt_logprobs in vLLM's shape (completions per choice, chat at the top)", async () => {
  const c = await client.completions.create({ model, prompt: "the cat sat on the mat", max_tokens: 2, prompt_logprobs: 2 });
  checkPromptLogprobs(c.choices[0].prompt_logprobs, c.usage.prompt_tokens, 2);
  const ch = await client.chat.completions.create({ model, messages: say, max_tokens: 2, prompt_logprobs: 1 });
  checkPromptLogprobs(ch.prompt_logprobs, ch.usage.prompt_tokens, 1);
  assert.equal(await status(client.completions.create({ model, prompt: "x", max_tokens: 2, prompt_logprobs: 1, stream: true })), 400);
});
await check("vllm: chat_template_kwargs are template variables; a name Qwen 2.5's template never reads, or a string, is refused", async () => {
  assert.equal(await status(client.chat.completions.create({ model, messages: say, max_tokens: 2, chat_template_kwargs: { enable_thinking: false } })), 400);
  assert.equal(await status(client.chat.completions.create({ model, messages: say, max_tokens: 2, chat_template_kwargs: { tools: "x" } })), 400);
});
await check("vllm: a list of prompts on completions, choices prompt-major, usage summed", async () => {
  const prompts = ["Once upon a time", "the cat sat"];
  const single = [];
  for (const p of prompts) single.push(await client.completions.create({ model, prompt: p, max_tokens: 5, temperature: 0 }));
  const r = await client.completions.create({ model, prompt: prompts, max_tokens: 5, temperature: 0, n: 2 });
  assert.equal(r.choices.length, 4);
  for (const ch of r.choices) {
    const i = Math.floor(ch.index / 2);
    assert.equal(ch.text, single[i].choices[0].text, `choice ${ch.index} is not prompt ${i}'s`);
  }
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2, 3]);
  assert.equal(r.usage.prompt_tokens, single[0].usage.prompt_tokens + single[1].usage.prompt_tokens); // once per prompt, as vLLM counts
  assert.equal(r.usage.completion_tokens, 20);
});

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

console.log(failed ? `sdk-test: ${failed} check(s) failed` : "sdk-test: every check passed");
process.exit(failed ? 1 : 0);
