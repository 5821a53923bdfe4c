// Runs llama.cpp (node-llama-cpp) on the files of cases.json written by
// engine/model/testdata/archcheck and prints, per case, the raw logits of
// every position (CPU, F32 KV cache, no flash attention: its CPU kernel
// rounds Q and K to F16), as JSON for TestLlamaCppLogits.
import {getLlama} from "node-llama-cpp";
import fs from "fs";
const dir = process.argv[2];
const cases = JSON.parse(fs.readFileSync(dir + "/cases.json"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const version = JSON.parse(fs.readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url))).version;
const out = {node_llama_cpp: version, cases: []};
for (const c of cases) {
  const model = await llama.loadModel({modelPath: c.file});
  const ctx = await model.createContext({contextSize: 256, batchSize: 256, threads: 1, flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
  const seq = ctx.getSequence();
  const res = await seq.controlledEvaluate(c.tokens.map((t) => [t, {generateNext: {logits: true}}]));
  const vocab = c.config.Vocab;
  const logits = res.map((r) => {
    const row = new Array(vocab).fill(null);
    for (const [t, v] of r.next.logits) row[t] = v;
    if (row.some((v) => v === null)) throw new Error(`${c.name}: llama.cpp returned ${r.next.logits.size} logits, want ${vocab}`);
    return row;
  });
  out.cases.push({name: c.name, arch: model.fileInfo.metadata.general.architecture, config: c.config, tokens: c.tokens, logits});
  await ctx.dispose();
  await model.dispose();
}
console.log(JSON.stringify(out));
