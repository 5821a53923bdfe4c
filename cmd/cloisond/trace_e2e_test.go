package main

import (
	"context"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// otlpCollector is an in-process OTLP/gRPC trace receiver: the spans each
// node (by its cloison.role resource attribute) exported.
type otlpCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans map[string][]exported // by role
}

type exported struct{ name, trace, id, parent string }

func (c *otlpCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		role := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "cloison.role" {
				role = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans[role] = append(c.spans[role], exported{name: s.GetName(), trace: hex.EncodeToString(s.GetTraceId()),
					id: hex.EncodeToString(s.GetSpanId()), parent: hex.EncodeToString(s.GetParentSpanId())})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) find(role, name string) (exported, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans[role] {
		if s.name == name {
			return s, true
		}
	}
	return exported{}, false
}

// A decode and a prefill cloisond, each with --otlp-endpoint: a completion
// sent with a W3C traceparent is one trace in the collector, the decode
// node's server span the caller's child and the prefill node's
// PrefillService span the child of the decode node's transfer span.
func TestE2ETraceAcrossNodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &otlpCollector{spans: map[string][]exported{}}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	otlp := []string{"--otlp-endpoint", ln.Addr().String(), "--otlp-insecure"}

	c := newCluster(t, "prefill-1", "decode")
	db := pgtest.New(t)
	p := c.prefillNode(t, db.AdminURL, "prefill-1", c.clusterKey, otlp...)
	d := startNode(t, db.AdminURL, pgtestRoles(), c.flags("decode", "decode", c.clusterKey,
		append([]string{"--transfer-addr", "127.0.0.1:0", "--prefill-peers", p.grpcAddr}, otlp...)...)...)
	createTenant(t, db.AdminURL, "acme", nil)
	tok := d.token("acme", time.Hour, tenancy.ScopeInfer)
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", d.base+"/v1/completions", strings.NewReader(string(completion("hello, traced world", 4, false))))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %d", resp.StatusCode)
	}
	if tr := resp.Header.Get("traceresponse"); !strings.HasPrefix(tr, "00-"+traceID+"-") {
		t.Errorf("traceresponse %q, want trace %s", tr, traceID)
	}
	// The batchers export within their interval (5 s).
	var srv, transfer, rpc exported
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok1, ok2, ok3 bool
		srv, ok1 = col.find("decode", "POST /v1/completions")
		transfer, ok2 = col.find("decode", "transfer")
		rpc, ok3 = col.find("prefill", "/cloison.prefill.v1.PrefillService/Prefill")
		if ok1 && ok2 && ok3 {
			break
		}
		if time.Now().After(deadline) {
			col.mu.Lock()
			t.Fatalf("spans missing after 30 s: %v", col.spans)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range []exported{srv, transfer, rpc} {
		if s.trace != traceID {
			t.Errorf("span %s in trace %s, want %s", s.name, s.trace, traceID)
		}
	}
	if srv.parent != parent {
		t.Errorf("decode server span's parent %s, want the caller's %s", srv.parent, parent)
	}
	if rpc.parent != transfer.id {
		t.Errorf("prefill node's span parent %s, want the decode node's transfer span %s", rpc.parent, transfer.id)
	}
}
