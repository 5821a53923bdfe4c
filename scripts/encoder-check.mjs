// Runs llama.cpp (node-llama-cpp) on the files of cases.json written by
// engine/model/testdata/encodercheck and prints, per case, the pooled
// embedding of every input (an embedding context) or the rank score of
// every pair (a ranking context: node-llama-cpp's probability turned back
// into llama.cpp's logit for an encoder, the probability itself for a
// qwen3 decoder reranker), as JSON for TestLlamaCppEncoders. CPU only.
import {getLlama} from "node-llama-cpp";
import fs from "fs";
const dir = process.argv[2];
const cases = JSON.parse(fs.readFileSync(dir + "/cases.json"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const version = JSON.parse(fs.readFileSync(new URL("./node_modules/node-llama-cpp/package.json", import.meta.url))).version;
const out = {node_llama_cpp: version, cases: []};
for (const c of cases) {
  const model = await llama.loadModel({modelPath: c.file});
  const rec = {name: c.name, arch: model.fileInfo.metadata.general.architecture, config: c.config, inputs: c.inputs};
  for (const k of ["decoder", "pooling", "add_eos", "texts"]) if (c[k] !== undefined) rec[k] = c[k];
  if (c.decoder && c.decoder.Rerank) {
    // A decoder reranker (qwen3): each input is a whole rerank prompt,
    // scored as given by the ranking context's own evaluation (rank()
    // builds its prompt from the template by tokenizing its pieces apart;
    // the prompts here are tokenized whole, as llama.cpp's server does).
    // qwen3's score is already the softmax's "yes" probability.
    const ctx = await model.createRankingContext({contextSize: 1024, batchSize: 1024, threads: 1});
    rec.probabilities = [];
    for (const input of c.inputs) rec.probabilities.push(await ctx._evaluateRankingForInput(input));
    await ctx.dispose();
  } else if (c.texts) {
    // Texts llama.cpp tokenizes itself: an embedding context adds the
    // vocabulary's BOS and EOS (add_eos_token) as llama.cpp's tokenizer
    // does; the tokens it evaluated are recorded.
    const ctx = await model.createEmbeddingContext({contextSize: 1024, batchSize: 1024, threads: 1});
    rec.vectors = [];
    rec.inputs = [];
    for (const text of c.texts) {
      const toks = model.tokenize(text);
      ctx._prepareInput(toks);
      rec.inputs.push([...toks]);
      rec.vectors.push([...(await ctx.getEmbeddingFor(text)).vector]);
    }
    await ctx.dispose();
  } else if (c.split) {
    const ctx = await model.createRankingContext({contextSize: 128, batchSize: 128, threads: 1});
    rec.scores = [];
    for (const [i, input] of c.inputs.entries()) {
      // node-llama-cpp builds [CLS] query [SEP] document (no EOS in a
      // WordPiece vocabulary): the document carries the closing [SEP].
      const p = await ctx.rank(input.slice(1, c.split[i] - 1), input.slice(c.split[i]));
      rec.scores.push(Math.log(p / (1 - p)));
    }
    await ctx.dispose();
  } else {
    const ctx = await model.createEmbeddingContext({contextSize: 128, batchSize: 128, threads: 1});
    rec.vectors = [];
    for (const input of c.inputs) rec.vectors.push([...(await ctx.getEmbeddingFor(input)).vector]);
    await ctx.dispose();
  }
  out.cases.push(rec);
  await model.dispose();
}
console.log(JSON.stringify(out));
