// Package synth writes synthetic llama-family GGUF models, because
// development and CI cannot download weights. The files follow the GGUF
// specification and llama.cpp's key names (general.architecture "llama",
// "qwen3", "qwen3moe", "gemma3", "phi3" or "granite", <arch>.*
// hyperparameters, tokenizer.ggml.* with a gpt2-style byte-level BPE
// vocabulary), so other GGUF readers load them too.
//
// Two kinds:
//
// Random (Config): seeded random weights of any size, for numerics and speed.
// Weights are N(0, 1/fan_in) so activations stay O(1) through many layers;
// norm weights are 1 + N(0, 0.1). Matrices are F32, F16, Q4_1, Q5_0, Q5_1,
// Q8_0, MXFP4 (ggml's reference exponent choice), Q2_K, Q3_K, Q4_K, Q5_K or
// Q6_K (the k-quants from kernels.Quantize's simple min/max or absmax
// search, not llama.cpp's error-minimising one); Config.KQuantMix with Q4_K or Q5_K
// writes a Q4_K_M / Q5_K_M-style file (output.weight and the use_more_bits
// layers' attn_v and ffn_down in Q6_K, general.file_type 15 / 17).
// Config.Arch "qwen3" writes a qwen3 file as llama.cpp reads one: qwen3.*
// keys, and per layer attn_q_norm.weight and attn_k_norm.weight of HeadDim
// F32 weights; Config.HeadDim sets attention.key_length/value_length
// (written whenever the heads do not split d_model, or the architecture is
// not llama). "gemma3" adds qwen3's Q/K norms and post_attention_norm /
// post_ffw_norm; "phi3" fuses attn_qkv and writes a 2·FFN ffn_up (gate rows,
// then up rows) without ffn_gate; "granite" writes granite.logit_scale.
// Window, SWAPattern, RopeBaseSWA, RopeDims, FinalSoftcap and granite's
// LogitScale/ResidualScale/EmbedScale/AttnScale write the matching keys
// (attention.sliding_window[_pattern], rope.freq_base_swa,
// rope.dimension_count, final_logit_softcapping, logit_scale, …).
// Config.Arch "qwen3moe" (qwen3 attention) and "mixtral" (a llama file:
// general.architecture "llama") write mixtures of experts:
// <arch>.expert_count / expert_used_count (qwen3moe also
// expert_feed_forward_length = FFN), and per layer an F32 router
// ffn_gate_inp.weight [d_model, experts] and the merged expert stacks
// ffn_gate_exps/ffn_up_exps.weight [d_model, FFN, experts] and
// ffn_down_exps.weight [FFN, d_model, experts] in place of the dense
// feed-forward (the k-quant mix counts ffn_down_exps as ffn_down).
//
// Encoders (BertConfig, Bert): a random-weight "bert" or "nomic-bert" file
// with a WordPiece vocabulary (BertVocab: [PAD] 0, [UNK] 100, [CLS] 101,
// [SEP] 102, [MASK] 103, ASCII characters as word starts and continuations,
// some English words), pooling_type mean, CLS or rank (cls and cls.output
// heads), in the tensor layout llama.cpp's converter writes. Arch
// "t5encoder" writes a T5 encoder instead (enc.blk.N.* tensors, attn_rel_b
// on layer 0, gated GELU or ReLU, KeyLength) with a SentencePiece Unigram
// vocabulary (T5Vocab: <pad> 0, </s> 1, <unk> 2, ASCII pieces and words
// with scores; add_eos_token) and attention.causal false.
//
// ContextBag (BagConfig): a one-layer llama that can only emit tokens present
// in the KV it attends over — the oracle of the leak tests. Any output token
// absent from a request's own context proves a cross-request read. With V
// tokens, d = V+1 rounded up to a multiple of 64, and B = V the "bias"
// dimension:
//
//   - Embedding: E[t] = e_t + c·e_B with c = 8: a one-hot token dimension plus a
//     constant bias dimension. The bias dominates every residual vector, so
//     each RMSNorm divides by an almost constant amount (its input's squared
//     norm lies in [c², c²+4]), whatever the context holds.
//   - Attention: Wq = Wk = 0, so every score is 0 and attention is exactly
//     uniform over positions 0…p (RoPE of zero is zero). Wv = I, so the
//     attention output is the mean of the normalised inputs: dimension t holds
//     f_t/r0, where f_t is the frequency of token t among positions 0…p and
//     r0 = sqrt((1+c²)/d) is the (constant) RMS of an embedding.
//     Wo = β·r0·I with the bias row zeroed and β = GapTokens: the residual
//     gains exactly β·f_t in dimension t — the token's count when the context
//     holds β positions. Heads are 64 wide (d/64 query and KV heads).
//   - Feed-forward: all zero weights, so it adds exactly 0.
//   - Output: output_norm = 1, output.weight row t = α·e_t (nothing from the
//     bias dimension). The logit of token t is α·x[t]/rms(x) with
//     x[t] = β·f_t (+1 for the current token).
//
// Consequences. An absent token has f_t = 0, every product that reaches its
// logit is an exact zero, so its logit is exactly 0.0; a present token's logit
// is strictly positive. Under greedy decoding only a context token can win,
// for any context length, and the winner is the most frequent token of the
// attended KV (the current token counts once more): the model reports what it
// read, so KV read from another request shows in its output. Without β the
// current token's own +1 would outweigh every frequency (≤ 1) and the model
// would only echo its input, blind to what it attends over.
//
// Since Σ_t (β·f_t + δ_t)² ≤ (1+β)², rms(x) ≤ sqrt((c²+(1+β)²)/d), and a token
// present once in n tokens has a logit ≥ α·β·sqrt(d)/(n·sqrt(c²+(1+β)²)); α is
// chosen so that this is ≥ 32 at n = BagConfig.GapTokens (default 4096). So for
// contexts up to GapTokens every absent token sits ≥ 32 logits below every
// present token: under temperature ≤ 1 sampling its probability is < e^-32 per
// step. (For longer contexts the gap shrinks as GapTokens/n but never reaches
// 0.) The largest logit is ≤ α·sqrt(d) ≈ 32·GapTokens, far from float32
// overflow.
//
// The advertised context length (llama.context_length) is a separate knob:
// tests need a model that advertises 1,048,576 tokens.
//
// BagConfig.FIM ends a context bag's vocabulary with FIMTokens (control
// tokens) named in tokenizer.ggml.fim_{pre,suf,mid}_token_id: a model that
// allows fill-in-the-middle (cloisonctl model synth --bag --fim).
//
// LoRA (LoRAConfig): a random LoRA adapter for a base model file, in
// llama.cpp's adapter format (general.type "adapter", adapter.type "lora",
// adapter.lora.alpha, pairs T.lora_a [in, rank] and T.lora_b [rank, out]
// for the base tensors T it adapts: by default every layer's attn_q, attn_k,
// attn_v, attn_output, ffn_gate, ffn_up and ffn_down, optionally
// output.weight), F32 or F16, sized so that the adapted products move by
// about Strength of the base's (cloisonctl model synth --lora BASE.gguf).
//
//	w, err := synth.Random(synth.Config{Layers: 4, DModel: 512, Heads: 8, KVHeads: 4,
//		FFN: 1408, Vocab: 2048, Context: 4096, DType: gguf.Q8_0, Seed: 1})
//	err = w.WriteFile("tiny.gguf")
//
// # Checked by tests
//
// The same config gives the same bytes. TestContextBagReportsWhatItReads (engine/model) fails
// on the construction without β (an oracle blind to foreign reads). The files
// load in llama.cpp: it tokenizes 68/68 test strings as engine/tokenizer does
// and its greedy continuations equal engine/model's (F32, F16, context-bag);
// see engine/model/testdata/llamacpp/README.md. A context-bag model
// advertising 1,048,576 tokens:
//
//	w, err = synth.ContextBag(synth.BagConfig{Context: 1 << 20})
//	err = w.WriteFile("bag.gguf")
package synth
