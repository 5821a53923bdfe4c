// peer-bench: Cloison's CPU forward pass against llama.cpp (through
// node-llama-cpp) on the same GGUF files, measured alternately in one run.
//
//   node scripts/peer-bench.mjs --cloisonctl BIN --models a.gguf,b.gguf \
//        [--threads 1,2] [--prompts 128,2048] [--decode 63] [--rounds 3] [--json out.json] \
//        [--check-logits f32.gguf]
//
// For every model, thread count and prompt length it runs, `--rounds`
// times, first `cloisonctl bench` (best of two repetitions) and then llama.cpp on the
// same token ids: prefill of the prompt in one batch, then --decode greedy
// steps. Each side keeps its best round; the table prints ours ÷ llama.cpp.
// llama.cpp's own timing is wall time around node-llama-cpp's evaluate (time
// to the first generated token = prefill, the rest = decode), as ours is
// wall time around Forward.
//
// --check-logits: for each file named (the F32 one) and each prompt length,
// the logits at the last prompt token, ours (cloisonctl bench --logits) and
// llama.cpp's (F32 KV cache, no flash attention, as make arch-check), must
// agree within 1e-3; the run fails otherwise.
//
// Machines shared with other work give noisy figures: the alternation keeps
// the two sides under the same load, not the load away.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function args() {
  const a = { threads: [1, 2], prompts: [128, 2048], decode: 63, rounds: 3, models: [], json: "", checkLogits: [], kv: "f16" };
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
      case "--prompts": a.prompts = ints(); break;
      case "--decode": a.decode = ints()[0]; break;
      case "--rounds": a.rounds = ints()[0]; break;
      case "--json": a.json = x; break;
      case "--kv":
        if (x !== "f32" && x !== "f16") throw new Error(`--kv ${x}: want f32 or f16`);
        a.kv = x;
        break;
      case "--check-logits": a.checkLogits = x.split(",").filter((m) => m !== ""); break;
      default: throw new Error(`unknown flag ${k}`);
    }
  }
  if (!a.cloisonctl || a.models.length === 0) throw new Error("need --cloisonctl and --models");
  return a;
}

// The token ids of cloisonctl bench (benchTokens, seed 0).
function benchTokens(n, vocab) {
  const out = new Array(n);
  let x = 1 >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = (x >>> 8) % vocab;
  }
  return out;
}

function ours(a, model, threads, prompt) {
  // Two repetitions, the best kept: the first also faults the memory-mapped
  // weights in, which llama.cpp does while loading, outside its timing.
  const r = spawnSync(a.cloisonctl, ["bench", model, "--json", "--reps", "2", "--threads", String(threads),
    "--prompt", String(prompt), "--decode", String(a.decode), "--kv-type", a.kv], { encoding: "utf8", maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`cloisonctl bench ${model}: ${r.stderr || r.error}`);
  const rep = JSON.parse(r.stdout);
  if (rep.kv_type !== a.kv) throw new Error(`cloisonctl bench ran a ${rep.kv_type} KV arena, asked ${a.kv}`);
  return { prefill: rep.results[0].prefill_tok_s, decode: rep.results[0].decode_tok_s, path: rep.path, cpu: rep.cpu, paths: rep.cpu_paths };
}

async function theirs(llama, a, m, threads, prompt, vocab) {
  // The same KV element type on both sides (llama.cpp's default is F16).
  const kv = a.kv.toUpperCase();
  const ctx = await m.model.createContext({ contextSize: prompt + a.decode + 64, batchSize: prompt, threads, sequences: 1,
    experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv });
  try {
    const seq = ctx.getSequence();
    const toks = benchTokens(prompt, vocab);
    const t0 = performance.now();
    let t1 = 0, n = 0;
    for await (const tok of seq.evaluate(toks, { temperature: 0 })) {
      void tok;
      if (n === 0) t1 = performance.now();
      if (n === a.decode) break;
      n++;
    }
    const t2 = performance.now();
    return { prefill: prompt / ((t1 - t0) / 1e3), decode: a.decode > 0 ? a.decode / ((t2 - t1) / 1e3) : 0 };
  } finally {
    await ctx.dispose();
  }
}

// checkLogits compares the logits at the last prompt token.
async function checkLogits(llama, a, path) {
  const out = [];
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  try {
    const vocab = model.tokens?.vocabularySize ?? model.fileInfo?.metadata?.llama?.vocab_size;
    for (const prompt of a.prompts) {
      const r = spawnSync(a.cloisonctl, ["bench", path, "--json", "--reps", "1", "--threads", "1", "--prompt", String(prompt),
        "--decode", "0", "--logits", "--kv-type", "f32"], { encoding: "utf8", maxBuffer: 1 << 26 });
      if (r.status !== 0) throw new Error(`cloisonctl bench --logits ${path}: ${r.stderr || r.error}`);
      const ours = JSON.parse(r.stdout).results[0].logits;
      const ctx = await model.createContext({ contextSize: prompt + 64, batchSize: prompt, threads: 1, sequences: 1,
        flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
      try {
        const toks = benchTokens(prompt, vocab);
        const res = await ctx.getSequence().controlledEvaluate(toks.map((t, i) => (i === prompt - 1 ? [t, { generateNext: { logits: true } }] : t)));
        const theirs = new Array(vocab).fill(null);
        for (const [t, v] of res[prompt - 1].next.logits) theirs[t] = v;
        if (ours.length !== vocab || theirs.some((v) => v === null)) throw new Error(`${path}: ${ours.length} / ${vocab} logits`);
        let worst = 0;
        for (let i = 0; i < vocab; i++) worst = Math.max(worst, Math.abs(ours[i] - theirs[i]));
        if (!(worst <= 1e-3)) process.exitCode = 1;
        out.push({ model: path, prompt, max_abs_diff: worst, ok: worst <= 1e-3 });
        console.log(`${path}  prompt=${prompt}: max |logit − llama.cpp| = ${worst.toExponential(2)} (${worst <= 1e-3 ? "ok" : "FAIL"}: want ≤ 1e-3)`);
      } finally {
        await ctx.dispose();
      }
    }
  } finally {
    await model.dispose();
  }
  return out;
}

const a = args();
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const rows = [];
const logitChecks = [];
for (const path of a.checkLogits) logitChecks.push(...(await checkLogits(llama, a, path)));
let info = {};
for (const path of a.models) {
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const vocab = model.tokens?.vocabularySize ?? model.fileInfo?.metadata?.llama?.vocab_size;
  if (!Number.isInteger(vocab) || vocab <= 0) throw new Error(`${path}: vocabulary size unknown`);
  for (const threads of a.threads) {
    for (const prompt of a.prompts) {
      const best = { ours: { prefill: 0, decode: 0 }, theirs: { prefill: 0, decode: 0 } };
      for (let r = 0; r < a.rounds; r++) {
        const o = ours(a, path, threads, prompt);
        info = { cpu: o.cpu, cloison_path: o.path, cloison_paths: o.paths };
        const t = await theirs(llama, a, { model }, threads, prompt, vocab);
        for (const [k, v] of [["ours", o], ["theirs", t]]) {
          best[k].prefill = Math.max(best[k].prefill, v.prefill);
          best[k].decode = Math.max(best[k].decode, v.decode);
        }
      }
      const row = { model: path, threads, prompt, decode_steps: a.decode, ours: best.ours, llama_cpp: best.theirs,
        prefill_ratio: best.ours.prefill / best.theirs.prefill, decode_ratio: best.ours.decode / best.theirs.decode };
      rows.push(row);
      console.log(`${path}  threads=${threads} prompt=${prompt}: prefill ${best.ours.prefill.toFixed(1)} / ${best.theirs.prefill.toFixed(1)} tok/s (${row.prefill_ratio.toFixed(2)}), ` +
        `decode ${best.ours.decode.toFixed(1)} / ${best.theirs.decode.toFixed(1)} tok/s (${row.decode_ratio.toFixed(2)})`);
    }
  }
  await model.dispose();
}
let sys = "";
try { sys = String(llama.systemInfo ?? ""); } catch { sys = ""; }
const report = { ...info, llama_cpp_build: llama.buildType, llama_cpp_system_info: sys, node_llama_cpp: "3.22.1", kv_type: a.kv, rounds: a.rounds, results: rows, logits: logitChecks };
console.log(`cpu ${info.cpu}; KV ${a.kv} on both sides; cloison path ${info.cloison_path} (of ${info.cloison_paths}); llama.cpp: ${sys}`);
if (a.json) writeFileSync(a.json, JSON.stringify(report, null, 2) + "\n");
