// Teacher-forced logits of llama.cpp (node-llama-cpp) on a GGUF file at the
// positions scripts/peer-quant/main.go reports, compared with Cloison's:
//   node peer-quant.mjs MODEL.gguf OURS.json
// prints one JSON line (max |logit difference|, relative to max |logit|, and
// how many positions have the same argmax) and exits 1 above --max-rel.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { readFileSync } from "node:fs";
const [path, oursPath, maxRelArg] = process.argv.slice(2);
const maxRel = Number(maxRelArg ?? "0.1");
const ours = JSON.parse(readFileSync(oursPath, "utf8"));
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
const ctx = await model.createContext({ contextSize: 256, batchSize: 64, threads: 1, sequences: 1 });
const seq = ctx.getSequence();
const toks = [...ours.prompt, ...ours.tokens.slice(0, ours.tokens.length - 1)];
const input = toks.map((t, i) => i >= ours.prompt.length - 1 ? [t, { generateNext: { logits: true } }] : t);
const out = await seq.controlledEvaluate(input);
let worst = 0, scale = 0, argmaxSame = 0, n = 0;
for (let i = ours.prompt.length - 1; i < toks.length; i++) {
  const mine = ours.logits[i - (ours.prompt.length - 1)];
  const theirs = out[i].next.logits;
  let s = 0, bm = 0, bt = 0;
  for (let v = 0; v < mine.length; v++) {
    const lt = theirs.get(v);
    s = Math.max(s, Math.abs(lt));
    worst = Math.max(worst, Math.abs(lt - mine[v]));
    if (mine[v] > mine[bm]) bm = v;
    if (lt > theirs.get(bt)) bt = v;
  }
  scale = Math.max(scale, s);
  n++; if (bm === bt) argmaxSame++;
}
console.log(JSON.stringify({ model: path.split("/").pop(), positions: n, max_abs_logit_diff: worst, max_abs_logit: scale, rel: worst / scale, argmax_same: argmaxSame }));
process.exit(worst / scale <= maxRel ? 0 : 1);
