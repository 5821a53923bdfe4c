// peer-batch: decode batches, 16 sequences ÷ one, Cloison's CPU forward pass
// against llama.cpp (through node-llama-cpp) on the same GGUF files,
// measured alternately in one run (the aim: 16 sequences decoded together
// at ≥ 8× one sequence's tokens/s, as batching promises on a GPU).
//
//   node scripts/peer-batch.mjs --cloisonctl BIN --models a.gguf,b.gguf \
//        [--threads 1] [--batch 16] [--prompt 16] [--decode 32] [--rounds 3] [--json out.json]
//
// For every model and thread count it runs, --rounds times, `cloisonctl
// bench --batch 1,N` (best of two repetitions each) and then llama.cpp with
// a context of one sequence and one of N sequences (`sequences: N`): the N
// sequences evaluate their prompts (cloisonctl bench's token ids, seed i for
// sequence i) concurrently, so node-llama-cpp puts every sequence's next
// token into one llama_decode per step, and then decode --decode greedy
// steps each. Decode tok/s is N·steps over the wall time from the last
// first token to the last token; each side keeps its best round. The table
// prints, per side, decode tok/s at 1 and N sequences and their ratio.
//
// Machines shared with other work give noisy figures: the alternation keeps
// the two sides under the same load, not the load away.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function args() {
  const a = { threads: [1], batch: 16, prompt: 16, decode: 32, rounds: 3, models: [], json: "", kv: "f16" };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) {
    const k = v[i], x = v[i + 1];
    if (x === undefined) throw new Error(`flag ${k} needs a value`);
    const ints = () => x.split(",").map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n <= 0) throw new Error(`${k}: ${s} is not a positive integer`);
      return n;
    });
    switch (k) {
      case "--cloisonctl": a.cloisonctl = x; break;
      case "--models": a.models = x.split(","); break;
      case "--threads": a.threads = ints(); break;
      case "--batch": a.batch = ints()[0]; break;
      case "--prompt": a.prompt = ints()[0]; break;
      case "--decode": a.decode = ints()[0]; break;
      case "--rounds": a.rounds = ints()[0]; break;
      case "--json": a.json = x; break;
      case "--kv":
        if (x !== "f32" && x !== "f16") throw new Error(`--kv ${x}: want f32 or f16`);
        a.kv = x;
        break;
      default: throw new Error(`unknown flag ${k}`);
    }
  }
  if (!a.cloisonctl || a.models.length === 0) throw new Error("need --cloisonctl and --models");
  if (a.batch < 2) throw new Error("--batch: want at least 2 sequences");
  return a;
}

// The token ids of cloisonctl bench (benchTokens, seed s).
function benchTokens(n, vocab, seed) {
  const out = new Array(n);
  let x = (Math.imul(seed, 2654435761) + 1) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = (x >>> 8) % vocab;
  }
  return out;
}

function ours(a, model, threads) {
  const r = spawnSync(a.cloisonctl, ["bench", model, "--json", "--reps", "2", "--threads", String(threads),
    "--prompt", String(a.prompt), "--decode", String(a.decode), "--batch", `1,${a.batch}`, "--kv-type", a.kv], { encoding: "utf8", maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`cloisonctl bench ${model}: ${r.stderr || r.error}`);
  const rep = JSON.parse(r.stdout);
  const at = (n) => rep.results.find((x) => x.batch === n).decode_tok_s;
  return { one: at(1), many: at(a.batch), path: rep.path, cpu: rep.cpu, paths: rep.cpu_paths };
}

// theirs decodes n sequences together and returns their decode tok/s.
async function theirs(model, a, threads, n, vocab) {
  // contextSize is per sequence (node-llama-cpp sets n_ctx = contextSize·sequences;
  // llama.cpp keeps one KV stream per sequence, kv_unified = false).
  const ctx = await model.createContext({ contextSize: a.prompt + a.decode + 64, batchSize: Math.max(n * a.prompt, 512), threads, sequences: n,
    experimentalKvCacheKeyType: a.kv.toUpperCase(), experimentalKvCacheValueType: a.kv.toUpperCase() });
  try {
    const first = new Array(n).fill(0), last = new Array(n).fill(0);
    await Promise.all(Array.from({ length: n }, async (_, s) => {
      const seq = ctx.getSequence();
      let k = 0;
      for await (const tok of seq.evaluate(benchTokens(a.prompt, vocab, s), { temperature: 0 })) {
        void tok;
        if (k === 0) first[s] = performance.now();
        if (k === a.decode) break;
        k++;
      }
      last[s] = performance.now();
    }));
    return n * a.decode / ((Math.max(...last) - Math.max(...first)) / 1e3);
  } finally {
    await ctx.dispose();
  }
}

const a = args();
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const rows = [];
let info = {};
for (const path of a.models) {
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const vocab = model.tokens?.vocabularySize ?? model.fileInfo?.metadata?.llama?.vocab_size;
  if (!Number.isInteger(vocab) || vocab <= 0) throw new Error(`${path}: vocabulary size unknown`);
  for (const threads of a.threads) {
    const best = { ours: { one: 0, many: 0 }, theirs: { one: 0, many: 0 } };
    for (let r = 0; r < a.rounds; r++) {
      const o = ours(a, path, threads);
      info = { cpu: o.cpu, cloison_path: o.path, cloison_paths: o.paths };
      const t = { one: await theirs(model, a, threads, 1, vocab), many: await theirs(model, a, threads, a.batch, vocab) };
      for (const [k, v] of [["ours", o], ["theirs", t]]) {
        best[k].one = Math.max(best[k].one, v.one);
        best[k].many = Math.max(best[k].many, v.many);
      }
    }
    const row = { model: path, threads, prompt: a.prompt, decode_steps: a.decode, batch: a.batch, ours: best.ours, llama_cpp: best.theirs,
      ours_ratio: best.ours.many / best.ours.one, llama_cpp_ratio: best.theirs.many / best.theirs.one };
    rows.push(row);
    console.log(`${path}  threads=${threads}: decode tok/s, 1 → ${a.batch} sequences: ours ${best.ours.one.toFixed(1)} → ${best.ours.many.toFixed(1)} ` +
      `(${row.ours_ratio.toFixed(2)}×), llama.cpp ${best.theirs.one.toFixed(1)} → ${best.theirs.many.toFixed(1)} (${row.llama_cpp_ratio.toFixed(2)}×)`);
  }
  await model.dispose();
}
let sys = "";
try { sys = String(llama.systemInfo ?? ""); } catch { sys = ""; }
const report = { ...info, llama_cpp_build: llama.buildType, llama_cpp_system_info: sys, node_llama_cpp: "3.22.1", rounds: a.rounds, results: rows };
console.log(`cpu ${info.cpu}; cloison path ${info.cloison_path} (of ${info.cloison_paths}); llama.cpp: ${sys}`);
if (a.json) writeFileSync(a.json, JSON.stringify(report, null, 2) + "\n");
