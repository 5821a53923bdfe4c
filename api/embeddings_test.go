package api_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

type embedAnswer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// embed posts body to /v1/embeddings and returns the answer's vectors as
// floats (decoding base64 ones).
func embed(t *testing.T, p *platformtest.Platform, tok, body string) ([][]float32, embedAnswer) {
	t.Helper()
	code, _, b := call(t, p, "POST", "/v1/embeddings", tok, body)
	var a embedAnswer
	if err := json.Unmarshal(b, &a); code != 200 || err != nil || a.Object != "list" {
		t.Fatalf("embeddings: %d %s (%v)", code, b, err)
	}
	out := make([][]float32, len(a.Data))
	for i, d := range a.Data {
		if d.Index != i || d.Object != "embedding" {
			t.Fatalf("data[%d]: index %d object %q", i, d.Index, d.Object)
		}
		var s string
		if json.Unmarshal(d.Embedding, &s) == nil {
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("data[%d]: base64 %q (%v)", i, s, err)
			}
			for j := 0; j < len(raw); j += 4 {
				out[i] = append(out[i], math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
			continue
		}
		if err := json.Unmarshal(d.Embedding, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out, a
}

func norm(v []float32) float64 {
	s := 0.0
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestEmbeddings: POST /v1/embeddings on a model that declares mean
// pooling answers OpenAI's shape, one unit vector per input of the
// model's width; the same input gives the same bits alone, in a list, as
// token ids and while another tenant's requests run; base64 is the
// float32 bytes of the float answer; dimensions truncates and
// renormalises; usage counts the prompt tokens, and the ledger holds
// request.completed with counts and keyed digests of the inputs and
// vectors, no text (and no Served: not replayed as a generation).
func TestEmbeddings(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "other"}, Pooling: 1})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	const a, b = "the cat sat on the mat", "zebra quilt zebra quilt"
	from := head(t, p)
	alone, ans := embed(t, p, tok, `{`+m+`,"input":"`+a+`"}`)
	ids := p.Tokenizer.Encode(a, true, false)
	if len(alone) != 1 || ans.Usage.PromptTokens != len(ids) || ans.Usage.TotalTokens != len(ids) {
		t.Fatalf("%d vectors, usage %+v; want 1 and %d tokens", len(alone), ans.Usage, len(ids))
	}
	if n := norm(alone[0]); math.Abs(n-1) > 1e-5 || len(alone[0]) < 64 {
		t.Fatalf("vector of %d values, norm %v; want unit", len(alone[0]), n)
	}
	list, ans := embed(t, p, tok, `{`+m+`,"input":["`+b+`","`+a+`"]}`)
	if len(list) != 2 || !sameBits(list[1], alone[0]) || sameBits(list[0], list[1]) {
		t.Fatalf("in a list: %d vectors, same as alone %v", len(list), len(list) == 2 && sameBits(list[1], alone[0]))
	}
	if want := len(ids) + len(p.Tokenizer.Encode(b, true, false)); ans.Usage.PromptTokens != want {
		t.Fatalf("usage %+v, want %d prompt tokens", ans.Usage, want)
	}
	idj, _ := json.Marshal(ids)
	byIDs, _ := embed(t, p, tok, `{`+m+`,"input":`+string(idj)+`}`)
	byLists, _ := embed(t, p, tok, `{`+m+`,"input":[`+string(idj)+`,`+string(idj)+`]}`)
	if !sameBits(byIDs[0], alone[0]) || !sameBits(byLists[0], alone[0]) || !sameBits(byLists[1], alone[0]) {
		t.Fatal("token ids give another vector than their text")
	}
	b64, _ := embed(t, p, tok, `{`+m+`,"input":"`+a+`","encoding_format":"base64"}`)
	if !sameBits(b64[0], alone[0]) {
		t.Fatal("base64 decodes to other bits than the float answer")
	}
	// The context bag's vectors are sparse: cut short of the width, past
	// the bias dimension.
	dims := len(alone[0]) - 16
	cut, _ := embed(t, p, tok, `{`+m+`,"input":"`+a+`","dimensions":`+strconv.Itoa(dims)+`}`)
	if len(cut[0]) != dims || math.Abs(norm(cut[0])-1) > 1e-5 {
		t.Fatalf("dimensions %d: %d values, norm %v", dims, len(cut[0]), norm(cut[0]))
	}
	scale := norm(alone[0][:dims])
	for j, x := range cut[0] {
		if math.Abs(float64(x)-float64(alone[0][j])/scale) > 1e-6 {
			t.Fatalf("dimensions: value %d is %v, want %v", j, x, float64(alone[0][j])/scale)
		}
	}

	t.Run("grpc", func(t *testing.T) {
		conn, gctx := p.GRPC(t)
		gctx = metadata.AppendToOutgoingContext(gctx, "authorization", "Bearer "+tok)
		var trailer metadata.MD
		res, err := inferencev1.NewInferenceServiceClient(conn).Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model,
			Texts: []string{b, a}}, grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetVectors()) != 2 || !sameBits(res.GetVectors()[1].GetValues(), alone[0]) || !sameBits(res.GetVectors()[0].GetValues(), list[0]) ||
			res.GetPromptTokens() != int64(ans.Usage.PromptTokens) || len(trailer.Get(api.ReceiptKey)) != 1 {
			t.Fatalf("gRPC Embed: %d vectors, prompt tokens %d, receipt %v; want HTTP's", len(res.GetVectors()), res.GetPromptTokens(), trailer.Get(api.ReceiptKey))
		}
		_, err = inferencev1.NewInferenceServiceClient(conn).Embed(gctx, &inferencev1.EmbedRequest{Model: platformtest.Model})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC Embed without input: %v, want InvalidArgument", err)
		}
	})

	t.Run("batch neighbours", func(t *testing.T) {
		other := "Bearer " + p.Token(t, "other", tenancy.ScopeInfer)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 {
				request(t, "POST", p.URL+"/v1/completions", other, `{`+m+`,"prompt":"`+strings.Repeat("quilt ", 20)+`","max_tokens":16}`)
			}
		}()
		for range 4 {
			got, _ := embed(t, p, tok, `{`+m+`,"input":["`+a+`","`+b+`","`+a+`"]}`)
			if !sameBits(got[0], alone[0]) || !sameBits(got[2], alone[0]) {
				t.Fatal("a vector changed with its batch neighbours")
			}
		}
		<-done
	})

	t.Run("ledger", func(t *testing.T) {
		var n int
		for _, r := range rows(t, p, from) {
			if strings.Contains(string(r.Payload), "cat sat") || strings.Contains(string(r.Payload), "zebra") {
				t.Fatalf("ledger row %s holds input text", r.Kind)
			}
			if r.Kind != audit.KindRequestCompleted || r.Tenant != "victim" {
				continue
			}
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			pl, err := env.DecodePayload()
			if err != nil {
				t.Fatal(err)
			}
			rc := pl.(*audit.RequestCompleted)
			if n == 0 {
				e := rc.Embedding
				if rc.PromptTokens != int64(len(ids)) || rc.CompletionTokens != 0 || rc.Status != "" || rc.Pages < 1 || rc.Served != nil || e == nil {
					t.Fatalf("first request.completed %+v", rc)
				}
				key, _ := audit.DigestKey(p.KEK, "victim", e.Key)
				if e.Inputs != 1 || e.Dimensions != int64(len(alone[0])) || e.Vectors != audit.EmbedVectorsDigest(key, alone) ||
					e.InputsDigest != audit.EmbedInputsDigest(key, [][]int32{ids}) || e.ModelDigest == (audit.Digest{}) || e.Operation != "" {
					t.Fatalf("first request.completed's embedding %+v: digests are not of the inputs and vectors served", e)
				}
			}
			n++
		}
		if n < 6 {
			t.Fatalf("%d request.completed rows, want one per embeddings request", n)
		}
	})
}

// TestEmbeddingsQuota: an embeddings request is charged its prompt tokens
// against the tenant's tokens-per-minute quota, and refused (429) once it
// is spent.
func TestEmbeddingsQuota(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 40, MaxContext: 1024}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Pooling: 3, Quotas: &q})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	body := `{"model":"` + platformtest.Model + `","input":"` + strings.Repeat("a", 15) + `"}`
	embed(t, p, tok, body)
	embed(t, p, tok, body)
	if code, eb, b := call(t, p, "POST", "/v1/embeddings", tok, body); code != 429 {
		t.Fatalf("third request over 40 tokens a minute: %d %s (%+v)", code, b, eb)
	}
}

// TestEmbeddingsRefusals: bad inputs and unknown fields are refused with
// a typed 400; a model that declares no pooling refuses the route.
func TestEmbeddingsRefusals(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Pooling: 2})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	for _, body := range []string{
		`{` + m + `}`,
		`{` + m + `,"input":null}`,
		`{` + m + `,"input":[]}`,
		`{` + m + `,"input":""}`,
		`{` + m + `,"input":[[]]}`,
		`{` + m + `,"input":42}`,
		`{` + m + `,"input":[1.5]}`,
		`{` + m + `,"input":["a",1]}`,
		`{` + m + `,"input":[{"text":"a"}]}`,
		`{` + m + `,"input":[99999999]}`,
		`{` + m + `,"input":[-1]}`,
		`{` + m + `,"input":"a","encoding_format":"int8"}`,
		`{` + m + `,"input":"a","dimensions":0}`,
		`{` + m + `,"input":"a","dimensions":100000}`,
	} {
		if code, eb, b := call(t, p, "POST", "/v1/embeddings", tok, body); code != 400 || eb.Error.Code != "invalid_request_error" {
			t.Errorf("%s: got %d %s, want 400 invalid_request_error", body, code, b)
		}
	}
	if code, eb, b := call(t, p, "POST", "/v1/embeddings", tok, `{`+m+`,"input":"a","normalize":false}`); code != 400 || !strings.Contains(eb.Error.Message, "normalize") {
		t.Errorf("unknown field: got %d %s", code, b)
	}

	plain := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	code, eb, b := call(t, plain, "POST", "/v1/embeddings", plain.Token(t, "victim", tenancy.ScopeInfer), `{`+m+`,"input":"a"}`)
	if code != 400 || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "no pooling") {
		t.Fatalf("model without pooling: got %d %s", code, b)
	}
}

// TestEmbeddingsWaves: a list of inputs larger than the tenant's kv_pages
// runs in waves and every vector is the one its input gets alone; an
// input larger than kv_pages alone is refused (context_length_exceeded).
func TestEmbeddingsWaves(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 3, TokensPerMinute: 1_000_000, MaxContext: 1024}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Pooling: 1, Quotas: &q})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	m := `"model":"` + platformtest.Model + `"`
	texts := []string{strings.Repeat("ab", 10), strings.Repeat("cd", 12), strings.Repeat("ef", 14), "gh", strings.Repeat("ij", 11)}
	var list []string
	for _, s := range texts {
		list = append(list, `"`+s+`"`)
	}
	all, _ := embed(t, p, tok, `{`+m+`,"input":[`+strings.Join(list, ",")+`]}`)
	for i, s := range texts {
		alone, _ := embed(t, p, tok, `{`+m+`,"input":"`+s+`"}`)
		if !sameBits(all[i], alone[0]) {
			t.Fatalf("input %d: its vector in waves differs from alone", i)
		}
	}
	if code, eb, b := call(t, p, "POST", "/v1/embeddings", tok, `{`+m+`,"input":"`+strings.Repeat("x", 60)+`"}`); code != 400 || eb.Error.Code != "context_length_exceeded" {
		t.Fatalf("input over kv_pages: %d %s", code, b)
	}
}
