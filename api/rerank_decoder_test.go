package api_test

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// decoderReranker is a small synthetic qwen3 decoder reranker
// (Qwen3-Reranker's layout: rank pooling, a yes/no cls.output, the rerank
// template).
func decoderReranker() *synth.Config {
	return &synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512,
		Context: 1024, DType: gguf.F32, Seed: 8, Rerank: true}
}

// TestDecoderRerank: a qwen3 decoder reranker serves /v1/rerank and
// /v1/score over HTTP and gRPC with the same bits: each pair is the rerank
// template filled with it (usage counts those prompts), its score the
// softmax's "yes" probability, in 0…1; a pair's score is the same alone,
// in any list, and while another tenant reranks beside it; embeddings are
// refused (a reranker), completions served (it is still a causal LM); the
// ledger holds counts and digests, never text.
func TestDecoderRerank(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "other"}, Decoder: decoderReranker(), Pages: 512})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	from := head(t, p)
	const q = "what is the capital of france"
	docs := []string{"paris is the capital of france", "the cat sat on the mat", "a river of water", "zebra quilt"}
	dj, _ := json.Marshal(docs)
	all := rerankCall(t, p, tok, `{`+m+`,"query":"`+q+`","documents":`+string(dj)+`}`)
	if len(all.Results) != len(docs) {
		t.Fatalf("rerank: %+v", all)
	}
	want := 0
	for _, d := range docs {
		ids := service.RankPrompt(p.Tokenizer, q, d)
		if ids[len(ids)-1] == p.Tokenizer.EOS || !slices.Contains(ids, synth.IMStart) {
			t.Fatalf("prompt %v: no template, or an EOS appended", ids)
		}
		want += len(ids)
	}
	if all.Usage.PromptTokens != want {
		t.Fatalf("usage %+v, want %d tokens", all.Usage, want)
	}
	scores := make([]float32, len(docs))
	for i, r := range all.Results {
		if i > 0 && r.RelevanceScore > all.Results[i-1].RelevanceScore {
			t.Fatalf("results not sorted: %+v", all.Results)
		}
		if !(r.RelevanceScore > 0 && r.RelevanceScore < 1) {
			t.Fatalf("score %v outside (0, 1)", r.RelevanceScore)
		}
		scores[r.Index] = r.RelevanceScore
	}
	if scores[0] == scores[1] {
		t.Fatalf("two documents score alike: %v", scores)
	}
	sc := scoreCall(t, p, tok, `{`+m+`,"text_1":"`+q+`","text_2":`+string(dj)+`}`)
	for i, d := range sc.Data {
		if math.Float32bits(d.Score) != math.Float32bits(scores[i]) {
			t.Fatalf("score %d: %v, rerank's %v", i, d.Score, scores[i])
		}
	}
	alone := scoreCall(t, p, tok, `{`+m+`,"text_1":"`+q+`","text_2":"`+docs[2]+`"}`)
	if math.Float32bits(alone.Data[0].Score) != math.Float32bits(scores[2]) {
		t.Fatalf("alone %v, in a list %v", alone.Data[0].Score, scores[2])
	}

	t.Run("grpc", func(t *testing.T) {
		conn, gctx := p.GRPC(t)
		gctx = metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
		c := inferencev1.NewInferenceServiceClient(conn)
		var trailer metadata.MD
		rr, err := c.Rerank(gctx, &inferencev1.RerankRequest{Model: platformtest.Model, Query: q, Documents: docs, TopN: 2}, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.GetResults()) != 2 || len(trailer.Get(api.ReceiptKey)) != 1 || rr.GetPromptTokens() != int64(want) {
			t.Fatalf("gRPC Rerank: %v", rr)
		}
		for i, r := range rr.GetResults() {
			if r.GetIndex() != int32(all.Results[i].Index) || r.GetRelevanceScore() != all.Results[i].RelevanceScore {
				t.Fatalf("gRPC result %d: %v, HTTP %+v", i, r, all.Results[i])
			}
		}
		sr, err := c.Score(gctx, &inferencev1.ScoreRequest{Model: platformtest.Model, Text_1: q, Text_2: docs})
		if err != nil || !slices.Equal(sr.GetScores(), scores) {
			t.Fatalf("gRPC Score: %v %v, want %v", sr.GetScores(), err, scores)
		}
		_, err = c.Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model, Texts: []string{q}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "reranker") {
			t.Fatalf("gRPC Embed on a reranker: %v", err)
		}
	})

	t.Run("embeddings and completions", func(t *testing.T) {
		code, eb, b := call(t, p, "POST", "/v1/embeddings", tok, `{`+m+`,"input":"a"}`)
		if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "reranker") {
			t.Fatalf("embeddings on a reranker: %d %s", code, b)
		}
		if code, _, b := call(t, p, "POST", "/v1/completions", tok, `{`+m+`,"prompt":"hello","max_tokens":2}`); code != 200 {
			t.Fatalf("completion on a decoder reranker: %d %s", code, b)
		}
	})

	t.Run("batch neighbours", func(t *testing.T) { checkScoresAlone(t, p, tok, m, q, docs[0], scores[0]) })
	t.Run("ledger", func(t *testing.T) { checkRankLedger(t, p, from, q, docs, want, 2) })
}

// TestLlamaServerRerank: on the synthetic qwen3 reranker that
// testdata/rerankcheck served with llama.cpp's own llama-server
// (--reranking; make rerank-check records testdata/llamaserver_rerank.json),
// our /v1/rerank gives every document's score within 1e-3 of llama.cpp's
// and counts the same prompt tokens: the rerank template filled and
// tokenized as its server does, the last token's state, the yes/no head
// and its softmax.
func TestLlamaServerRerank(t *testing.T) {
	b, err := os.ReadFile("testdata/llamaserver_rerank.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Server string       `json:"llama_server"`
		Config synth.Config `json:"config"`
		Cases  []struct {
			Query     string    `json:"query"`
			Documents []string  `json:"documents"`
			Scores    []float64 `json:"scores"`
			Tokens    int       `json:"prompt_tokens"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || len(rec.Cases) == 0 {
		t.Fatalf("%v, %d cases", err, len(rec.Cases))
	}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Decoder: &rec.Config, Pages: 512})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	worst := 0.0
	for _, c := range rec.Cases {
		body, _ := json.Marshal(map[string]any{"model": platformtest.Model, "query": c.Query, "documents": c.Documents})
		got := rerankCall(t, p, tok, string(body))
		if got.Usage.PromptTokens != c.Tokens {
			t.Errorf("%q: %d prompt tokens, llama-server %d", c.Query, got.Usage.PromptTokens, c.Tokens)
		}
		for _, r := range got.Results {
			d := math.Abs(float64(r.RelevanceScore) - c.Scores[r.Index])
			worst = max(worst, d)
			if d > 1e-3 {
				t.Errorf("%q, %q: score %v, llama-server %v", c.Query, c.Documents[r.Index], r.RelevanceScore, c.Scores[r.Index])
			}
		}
	}
	t.Logf("%s: worst score difference %.2g", rec.Server, worst)
}
