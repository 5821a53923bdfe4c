// The llama.cpp peer of BenchmarkEncoderEmbed: embeddings per second of
// node-llama-cpp's embedding context (CPU) on a GGUF file, N inputs of 128
// tokens each, one at a time as its getEmbeddingFor computes them.
// usage: node encoder-bench.mjs FILE.gguf [N] [THREADS]
import {getLlama} from "node-llama-cpp";
const [file, n = "8", threads = "2"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: file});
const ctx = await model.createEmbeddingContext({contextSize: 512, batchSize: 512, threads: Number(threads)});
const inputs = [];
for (let i = 0; i < Number(n); i++) {
  const x = [101];
  let s = (i * 2654435761 + 1) >>> 0;
  for (let j = 0; j < 126; j++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; x.push(104 + (s >>> 8) % 190); }
  inputs.push([...x, 102]);
}
await ctx.getEmbeddingFor(inputs[0]); // warm-up
const t0 = performance.now();
for (const x of inputs) await ctx.getEmbeddingFor(x);
const s = (performance.now() - t0) / 1000;
console.log(JSON.stringify({node_llama_cpp: "3.22.1", inputs: inputs.length, tokens: 128, seconds: s, embeddings_per_s: inputs.length / s}));
await ctx.dispose();
await model.dispose();
