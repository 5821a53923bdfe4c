package api_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestT5EncoderEmbeddings: a T5 encoder (t5encoder, mean pooling, Unigram
// vocabulary with </s> appended and no BOS, as llama.cpp tokenizes T5)
// serves /v1/embeddings: unit vectors of the model's width, the same bits
// alone, in a list and over gRPC, the usage the ids /tokenize gives; it
// generates nothing and ranks nothing (typed 400s).
func TestT5EncoderEmbeddings(t *testing.T) {
	enc := &synth.BertConfig{Arch: "t5encoder", Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 512, DType: gguf.F32, Pooling: 1}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Encoder: enc})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	const a = "the cat sat on the mat, in paris."
	alone, ans := embed(t, p, tok, `{`+m+`,"input":"`+a+`"}`)
	ids := p.Tokenizer.Encode(a, true, false)
	if len(ids) < 8 || ids[len(ids)-1] != synth.T5EOS || slices.Contains(ids[:len(ids)-1], synth.T5EOS) || slices.Contains(ids, synth.T5Unk) || ans.Usage.PromptTokens != len(ids) {
		t.Fatalf("tokens %v, usage %+v", ids, ans.Usage)
	}
	code, _, tb := call(t, p, "POST", "/tokenize", tok, `{`+m+`,"prompt":"`+a+`"}`)
	var tk struct {
		Tokens []int32 `json:"tokens"`
	}
	if err := json.Unmarshal(tb, &tk); code != 200 || err != nil || !slices.Equal(tk.Tokens, ids) {
		t.Fatalf("tokenize: %d %s, want %v", code, tb, ids)
	}
	if n := norm(alone[0]); len(alone[0]) != 64 || math.Abs(n-1) > 1e-5 {
		t.Fatalf("vector of %d values, norm %v", len(alone[0]), n)
	}
	list, _ := embed(t, p, tok, `{`+m+`,"input":["a dog in paris","`+a+`","what is the capital of france"]}`)
	if !sameBits(list[1], alone[0]) || sameBits(list[0], list[1]) {
		t.Fatal("a vector depends on its list neighbours")
	}
	conn, gctx := p.GRPC(t)
	gctx = metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
	res, err := inferencev1.NewInferenceServiceClient(conn).Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model, Texts: []string{"a dog in paris", a}})
	if err != nil || len(res.GetVectors()) != 2 || !sameBits(res.GetVectors()[1].GetValues(), alone[0]) || !sameBits(res.GetVectors()[0].GetValues(), list[0]) {
		t.Fatalf("gRPC Embed: %v", err)
	}
	code, eb, b := call(t, p, "POST", "/v1/completions", tok, `{`+m+`,"prompt":"hello","max_tokens":4}`)
	if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "encoder") {
		t.Fatalf("completion on an encoder: %d %s", code, b)
	}
	code, eb, b = call(t, p, "POST", "/v1/rerank", tok, `{`+m+`,"query":"cat","documents":["a cat"]}`)
	if code != 400 || eb.Error.Code != "unsupported" {
		t.Fatalf("rerank on a T5 encoder: %d %s", code, b)
	}
}
