// Compares llama.cpp (through node-llama-cpp) with ours.json written by main.go.
import {getLlama} from "node-llama-cpp";
import fs from "fs";
const ours = JSON.parse(fs.readFileSync(process.argv[2] + "/ours.json"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const models = new Map();
let tokSame = 0, tokAll = 0;
for (const r of ours) {
  if (!models.has(r.file)) models.set(r.file, await llama.loadModel({modelPath: r.file}));
  const model = models.get(r.file);
  const ids = Array.from(model.tokenize(r.text, false));
  tokAll++;
  if (same(ids, r.prompt || [])) tokSame++;
  else console.log("tokenize DIFF", r.file, JSON.stringify(r.text), "llama.cpp", ids.join(","), "ours", (r.prompt || []).join(","));
  if (!r.greedy) continue;
  const ctx = await model.createContext({contextSize: 512, batchSize: 512});
  const seq = ctx.getSequence();
  const out = [];
  for await (const t of seq.evaluate(ids, {temperature: 0})) { out.push(t); if (out.length >= r.greedy.length) break; }
  console.log(r.file, "arch", model.fileInfo.metadata.general.architecture, "context", model.trainContextSize,
    "greedy:", same(out, r.greedy) ? "SAME" : `DIFF llama.cpp ${out} ours ${r.greedy}`);
  await ctx.dispose();
}
console.log(`tokenization: ${tokSame}/${tokAll} SAME`);
