package synth

import "github.com/cloison/cloison/engine/tokenizer"

// Specials are the control tokens every synthetic vocabulary ends its byte
// tokens with: ids 256, 257, 258.
var Specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// FIMTokens are the fill-in-the-middle tokens (prefix, suffix, middle) a
// context bag with FIM ends its vocabulary with (BagConfig.FIM).
var FIMTokens = []string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}

// Special token ids.
const (
	EndOfText = 256 // BOS and EOS
	IMStart   = 257
	IMEnd     = 258 // end of turn
)

// ChatTemplate is the ChatML Jinja template written into every synthetic
// model (tokenizer.chat_template).
const ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// RerankTemplate is the rerank prompt llama.cpp's converter writes into a
// Qwen3-Reranker file (tokenizer.chat_template.rerank; {query} and
// {document} are replaced by the pair's texts), written into a synthetic
// reranker (Config.Rerank).
const RerankTemplate = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n" +
	"<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n" +
	"<|im_start|>assistant\n<think>\n\n</think>\n\n"

// Vocab returns a gpt2-style byte-level BPE vocabulary of n tokens (n ≥ 259):
// token b < 256 is byte b in GPT-2's byte-to-unicode form, then Specials, then
// merged tokens, each produced by the merge on the same line of merges. The
// merges build words from "Ġ" (space) and lowercase letters breadth-first, so
// ordinary lowercase English text compresses a little. Token types are 1
// (normal) and 3 (control).
func Vocab(n int) (tokens []string, types []int32, merges []string) {
	br := tokenizer.ByteRunes()
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(br[b]))
		types = append(types, 1)
	}
	for _, s := range Specials {
		tokens = append(tokens, s)
		types = append(types, 3)
	}
	alphabet := []string{string(br[' '])}
	for c := 'a'; c <= 'z'; c++ {
		alphabet = append(alphabet, string(c))
	}
	seen := map[string]bool{}
	for _, t := range tokens {
		seen[t] = true
	}
	level := alphabet
	for len(tokens) < n && len(level) > 0 {
		var next []string
		for _, left := range level {
			for _, right := range alphabet[1:] {
				if len(tokens) >= n {
					break
				}
				tok := left + right
				if seen[tok] {
					continue
				}
				seen[tok] = true
				tokens = append(tokens, tok)
				types = append(types, 1)
				merges = append(merges, left+" "+right)
				next = append(next, tok)
			}
		}
		level = next
	}
	return tokens, types, merges
}
