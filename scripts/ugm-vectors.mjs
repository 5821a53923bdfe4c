// Records llama.cpp's token ids for a vocabulary that llama.cpp ships without
// test vectors (a Unigram one: ggml-vocab-nomic-bert-moe.gguf), on the inputs of
// another vocabulary's .inp, through node-llama-cpp (add_special and
// parse_special off, as test-tokenizer-0). Run from .cache/peer-bench/node:
// node ugm-vectors.mjs VOCAB.gguf INPUTS.inp > engine/tokenizer/testdata/llamacpp-ugm-nomic-bert-moe.json
import {getLlama} from "node-llama-cpp";
import fs from "fs";
const [file, inp] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: file, vocabOnly: true});
const sep = "\n__ggml_vocab_test__\n";
const inputs = fs.readFileSync(inp, "utf8").split(sep).filter((x, i, a) => i < a.length - 1 || x !== "");
const out = inputs.map((s) => Array.from(model.tokenize(s, false)));
console.log(JSON.stringify({node_llama_cpp: "3.22.1", inputs, ids: out}));
