// Package tokenizer turns text into token ids and back, built from a GGUF
// file's tokenizer.ggml.* metadata the way llama.cpp builds its vocabulary:
//
//   - "gpt2": byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM, …). Text is first
//     split by the pre-tokenizer that tokenizer.ggml.pre names — GPT-2's
//     regular expression ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
//     ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), the Llama 3 and Qwen2 variants, or
//     the StarCoder/SmolLM variant that first isolates every digit, Qwen 3.5's
//     (combining marks join letter runs) — written out by hand, because Go's
//     regexp has no lookahead. Falcon, deepseek-llm and deepseek-coder split
//     in stages as llama.cpp does: a list of regular expressions applied in
//     order, each match and each gap between matches a piece for the next.
//     The Llama 3 family (llama-bpe, falcon3, pixtral) takes a piece that is a
//     whole vocabulary token as that token without merging (llama.cpp's
//     ignore_merges; "Cửa Việt" needs it). Each piece's bytes are
//     mapped to GPT-2's printable byte alphabet and merged by the ranks of
//     tokenizer.ggml.merges.
//   - "llama": SentencePiece BPE. Spaces become "▁", a space is prefixed
//     (tokenizer.ggml.add_space_prefix, default true), adjacent symbols are
//     merged highest tokenizer.ggml.scores first (leftmost on ties), and any
//     character not in the vocabulary falls back to its UTF-8 bytes as
//     <0xNN> tokens.
//   - "gemma4": Gemma 4's SentencePiece-style BPE. Spaces become "▁", the
//     text is split into runs of newlines (a run that is a token is that
//     token) and runs of other characters, each run's UTF-8 characters are
//     merged by the ranks of tokenizer.ggml.merges, and a symbol outside the
//     vocabulary falls back to <0xNN> tokens. BOS is always added, as
//     llama.cpp overrides add_bos_token for these files.
//   - "bert": WordPiece, as llama.cpp's WPM tokenizer. BertNormalizer
//     (tokenizer.ggml.normalizer.lowercase and .strip_accents, both on by
//     default: accents go by the first code point of each character's NFD
//     form, controls vanish) and BertPreTokenizer (whitespace splits,
//     punctuation, ASCII symbols and CJK ideographs are words of their own);
//     each word, prefixed with "▁" as the converted vocabulary stores word
//     starts ("##" continuations are stored bare), is split into the longest
//     tokens from the left, and a word with an unmatched part is [UNK].
//     Encode with addSpecial gives [CLS] text [SEP] (ids 101 and 102 unless
//     the file names others); Decode does not restore case or accents.
//   - "t5": SentencePiece Unigram, as llama.cpp's UGM tokenizer. The text
//     is normalized by the file's precompiled character map
//     (tokenizer.ggml.precompiled_charsmap: the longest known prefix is
//     replaced), spaces become "▁" (one prepended with add_space_prefix;
//     runs collapsed with remove_extra_whitespaces), then the Viterbi
//     search picks the split of highest total score (user-defined tokens
//     score 0; a code point no token starts with costs the lowest score −
//     10, consecutive unknowns becoming one UNK). EOS (1) is added, no BOS.
//     TestUnigramVectors checks llama.cpp's ids on nomic-bert-moe's
//     vocabulary (recorded through node-llama-cpp: llama.cpp ships no
//     vectors for it).
//
// Special tokens: control tokens (token type 3) are recognised in the input
// as whole strings only when the caller allows it (parseSpecial), so user
// text can never forge them; user-defined tokens (type 4) are always
// recognised. A rendered chat prompt is tokenized with EncodeTemplated:
// control tokens are recognised only inside the byte ranges that the chat
// template wrote itself (chat.Prompt.Literal), so message content can never
// yield one, not even across the edge of a range. BOS/EOS/EOT/UNK/PAD ids, the add_bos/add_eos flags, the chat
// template (tokenizer.chat_template) and a reranker's prompt (tokenizer.chat_template.rerank) are exposed as fields. Fill-in-the-middle
// ids (FIMPre/FIMSuf/FIMMid) come from tokenizer.ggml.fim_{pre,suf,mid}_token_id,
// the older prefix/suffix/middle keys, or the named tokens llama.cpp looks up
// (<|fim_prefix|>, <fim_prefix>, <｜fim▁begin｜>, ▁<PRE>, ...); EncodeInfill
// builds [BOS] FIM_PRE prefix FIM_SUF suffix FIM_MID, user text unparsed.
//
// Cross-check: TestLlamaCppVectors runs llama.cpp's own tokenizer vectors
// (models/ggml-vocab-*.gguf with .inp/.out, extracted by make llama-vocab,
// which make test runs) over every vocabulary of its set; each one either
// passes every vector (and decodes back to it, WordPiece excepted) or is
// refused with ErrUnsupported.
//
// A Tokenizer is immutable after FromGGUF and safe for concurrent use.
//
//	tok, err := tokenizer.FromGGUF(f)
//	ids := tok.Encode(prompt, true, false) // add BOS if the model wants it; no control tokens from text
//	text := tok.Decode(ids, false)
//
// # Checked by tests
//
// Tokenizers reproduce published ids: GPT-2 ("Hello world" → [15496, 995])
// and LLaMA SentencePiece (the llama-tokenizer-js test suite); control tokens
// in user text stay text unless the caller allows them. The vocabularies are in
// testdata (MIT, see SOURCE.md). Pre-tokenizers gpt-2, smollm/starcoder,
// llama-bpe and qwen2 are written by hand.
package tokenizer
