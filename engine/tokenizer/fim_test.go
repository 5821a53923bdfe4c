package tokenizer

import (
	"reflect"
	"testing"
)

// TestFIMTokens: the fill-in-the-middle ids come from the metadata (the
// current fim_* keys winning over the older prefix/suffix/middle keys),
// else from the named tokens llama.cpp looks up; a model lacking one of
// the three has no FIM. EncodeInfill builds [BOS] PRE prefix SUF suffix
// MID and never parses control tokens written in the user's text.
func TestFIMTokens(t *testing.T) {
	vocab := func(extra ...string) map[string]any {
		toks := []string{"a", "b", "ab", "<s>"}
		types := []int32{1, 1, 1, 3}
		for _, s := range extra {
			toks, types = append(toks, s), append(types, 3)
		}
		return map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": toks,
			"tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": []string{"a b"}}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name          string
		kv            map[string]any
		pre, suf, mid int32
	}{
		{"none", vocab(), -1, -1, -1},
		{"metadata", with(vocab("x", "y", "z"), "tokenizer.ggml.fim_pre_token_id", uint32(4),
			"tokenizer.ggml.fim_suf_token_id", uint32(5), "tokenizer.ggml.fim_mid_token_id", uint32(6)), 4, 5, 6},
		{"older keys", with(vocab("x", "y", "z"), "tokenizer.ggml.prefix_token_id", uint32(4),
			"tokenizer.ggml.suffix_token_id", uint32(5), "tokenizer.ggml.middle_token_id", uint32(6)), 4, 5, 6},
		{"current keys win", with(vocab("x", "y", "z"), "tokenizer.ggml.prefix_token_id", uint32(6),
			"tokenizer.ggml.fim_pre_token_id", uint32(4), "tokenizer.ggml.fim_suf_token_id", uint32(5),
			"tokenizer.ggml.fim_mid_token_id", uint32(6)), 4, 5, 6},
		{"qwen names", vocab("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), 4, 5, 6},
		{"starcoder names", vocab("<fim_middle>", "<fim_suffix>", "<fim_prefix>"), 6, 5, 4},
		{"codellama names", vocab("▁<PRE>", "▁<SUF>", "▁<MID>"), 4, 5, 6},
		{"deepseek names", vocab("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"), 4, 5, 6},
		{"two of three", vocab("<fim_prefix>", "<fim_suffix>"), 4, 5, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := fromMetadata(t, tc.kv)
			if tok.FIMPre != tc.pre || tok.FIMSuf != tc.suf || tok.FIMMid != tc.mid {
				t.Fatalf("got %d %d %d, want %d %d %d", tok.FIMPre, tok.FIMSuf, tok.FIMMid, tc.pre, tc.suf, tc.mid)
			}
			want := tc.pre >= 0 && tc.suf >= 0 && tc.mid >= 0
			if tok.HasFIM() != want {
				t.Fatalf("HasFIM %v", tok.HasFIM())
			}
			if _, ok := tok.EncodeInfill("a", "b"); ok != want {
				t.Fatalf("EncodeInfill ok %v", ok)
			}
		})
	}

	tok := fromMetadata(t, with(vocab("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
		"tokenizer.ggml.bos_token_id", uint32(3), "tokenizer.ggml.add_bos_token", true))
	got, _ := tok.EncodeInfill("ab", "b")
	if want := []int32{3, 4, 2, 5, 1, 6}; !reflect.DeepEqual(got, want) {
		t.Fatalf("infill %v, want %v", got, want)
	}
	// That control tokens written in the user's text stay text is shown
	// on a full byte vocabulary in api's TestCompletionsSuffix.
}
