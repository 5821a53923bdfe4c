// Runs llama.cpp (node-llama-cpp) on the base and LoRA adapter files of
// cases.json written by engine/model/testdata/loracheck, the adapter applied
// at scale 1 (llama.cpp's alpha/rank), and prints, per case, the raw logits
// of every position with and without the adapter (CPU, F32 KV cache, no flash attention), as JSON for
// TestLlamaCppLoRALogits.
import {getLlama} from "node-llama-cpp";
import fs from "fs";
const dir = process.argv[2];
const cases = JSON.parse(fs.readFileSync(dir + "/cases.json"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const version = JSON.parse(fs.readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url))).version;
const out = {node_llama_cpp: version, cases: []};
for (const c of cases) {
  const model = await llama.loadModel({modelPath: c.file});
  // The base alone first (its own distance to ours is the floor of the
  // adapted one's), then with the adapter.
  const run = async (lora) => {
    const ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 1, flashAttention: false,
      experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", ...lora});
    const seq = ctx.getSequence();
    const res = await seq.controlledEvaluate(c.tokens.map((t) => [t, {generateNext: {logits: true}}]));
    const vocab = c.config.Vocab;
    const logits = res.map((r) => {
      const row = new Array(vocab).fill(null);
      for (const [t, v] of r.next.logits) row[t] = v;
      if (row.some((v) => v === null)) throw new Error(`${c.name}: llama.cpp returned ${r.next.logits.size} logits, want ${vocab}`);
      return row;
    });
    await ctx.dispose();
    return logits;
  };
  const base_logits = await run({});
  const logits = await run({lora: {adapters: [{filePath: c.lora, scale: 1}]}});
  out.cases.push({name: c.name, config: c.config, lora_config: c.lora_config, tokens: c.tokens, logits, base_logits});
  await model.dispose();
}
console.log(JSON.stringify(out));
