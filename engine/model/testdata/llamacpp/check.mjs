import {getLlama} from "node-llama-cpp";
import fs from "fs";
const ours = JSON.parse(fs.readFileSync(process.argv[2] + "/ours.json"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
for (const r of ours) {
  const model = await llama.loadModel({modelPath: r.file});
  const ids = Array.from(model.tokenize(r.text, false));
  const ctx = await model.createContext({contextSize: 512, batchSize: 512});
  const seq = ctx.getSequence();
  const out = [];
  for await (const t of seq.evaluate(ids, {temperature: 0})) { out.push(t); if (out.length >= r.greedy.length) break; }
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  console.log(r.file, "tokenize:", same(ids, r.prompt) ? "SAME" : `DIFF ${ids} vs ${r.prompt}`, "greedy:", same(out, r.greedy) ? "SAME" : `DIFF llama.cpp ${out} vs ours ${r.greedy}`);
  console.log("  arch", model.fileInfo.metadata.general.architecture, "ctx", model.trainContextSize, "detok:", JSON.stringify(model.detokenize(out)));
  await ctx.dispose(); await model.dispose();
}
