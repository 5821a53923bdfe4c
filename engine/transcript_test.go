package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata transcripts")

// TestSchedulerTranscripts runs testdata/scheduler/*.txt: each case is a
// command, a "----" line, and the expected output, separated by blank lines
// (the style of raft's datadriven tests). Run with -rewrite to regenerate.
//
// Commands:
//
//	pool pages=N page=P [zeroing=never|cross-tenant|always]
//	tenant ID [reserved=N] [cap=N] [dedicated] [maxrun=N] [weight=N]
//	sched [batch=N] [chunk=N] [maxrun=N] [prefix]
//	submit ID tenant=T prompt=N max=M [served=N]   admission, then enqueue
//	step [stop=ID,ID]   Ready, zero, sample token 7 for every item with logits, Advance
//	cancel ID
//	state
//	counters            each tenant's Virtual Token Counter
func TestSchedulerTranscripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/scheduler/*.txt")
	if len(files) == 0 {
		t.Fatal("no transcripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			h := &harness{t: t, maxrun: map[cloison.TenantID]int{}, weight: map[cloison.TenantID]float64{}}
			for _, c := range parseCases(string(data)) {
				got := h.run(c.cmd)
				out.WriteString(c.comment + c.cmd + "\n----\n" + got + "\n")
				if !*rewrite && got != c.want {
					t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", file, c.cmd, got, c.want)
				}
			}
			if *rewrite {
				os.WriteFile(file, []byte(out.String()), 0o644)
			}
		})
	}
}

type tcase struct{ comment, cmd, want string }

func parseCases(s string) []tcase {
	var cases []tcase
	lines := strings.Split(s, "\n")
	comment := ""
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "" {
			continue
		}
		if strings.HasPrefix(lines[i], "#") {
			comment += lines[i] + "\n"
			continue
		}
		c := tcase{comment: comment, cmd: lines[i]}
		comment = ""
		i++ // ----
		var want []string
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			want = append(want, lines[i])
		}
		c.want = strings.Join(want, "\n")
		if len(want) > 0 {
			c.want += "\n"
		}
		cases = append(cases, c)
	}
	return cases
}

type harness struct {
	t      *testing.T
	pool   *isolation.Pool
	s      *Scheduler
	cfg    SchedulerConfig
	maxrun map[cloison.TenantID]int
	weight map[cloison.TenantID]float64
	served int
}

func kv(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func (h *harness) run(cmd string) string {
	f := strings.Fields(cmd)
	args := kv(f[1:])
	var b strings.Builder
	switch f[0] {
	case "pool":
		z, _ := isolation.ParseZeroing(cmp(args["zeroing"], "cross-tenant"))
		p, err := isolation.NewPool(isolation.Config{Pages: atoi(args["pages"]), PageTokens: atoi(args["page"]), DefaultZeroing: z})
		if err != nil {
			return err.Error() + "\n"
		}
		h.pool = p
		h.served = p.Pages() * p.PageTokens()
		h.s = NewScheduler(p, h.cfg)
	case "tenant":
		tc := isolation.TenantConfig{ID: cloison.TenantID(f[1]), Reserved: atoi(args["reserved"]), Cap: atoi(args["cap"])}
		if _, ok := args["dedicated"]; ok {
			tc.Tier = isolation.TierDedicated
		}
		if err := h.pool.AddTenant(tc); err != nil {
			return err.Error() + "\n"
		}
		h.maxrun[tc.ID] = atoi(args["maxrun"])
		h.weight[tc.ID] = float64(atoi(args["weight"]))
	case "sched":
		h.cfg = SchedulerConfig{MaxBatchTokens: atoi(args["batch"]), ChunkTokens: atoi(args["chunk"]), MaxRunning: atoi(args["maxrun"]),
			TenantMaxRunning: func(t cloison.TenantID) int { return h.maxrun[t] },
			TenantWeight:     func(t cloison.TenantID) float64 { return h.weight[t] }}
		_, h.cfg.PrefixCache = args["prefix"]
		h.s = NewScheduler(h.pool, h.cfg)
	case "submit":
		served := h.served
		if v, ok := args["served"]; ok {
			served = atoi(v)
		}
		adm := NewAdmission(AdmissionConfig{ServedContext: served, Vocab: 1000, Pool: h.pool})
		p := make([]int32, atoi(args["prompt"]))
		for i := range p {
			p[i] = int32(i % 100)
		}
		tk, err := adm.Admit(Request{ID: cloison.RequestID(f[1]), Tenant: cloison.TenantID(args["tenant"]), Prompt: p, MaxTokens: atoi(args["max"])})
		if err != nil {
			fmt.Fprintf(&b, "rejected: %s\n", cloison.ErrorCode(err))
			break
		}
		if err := h.s.Enqueue(tk); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
			break
		}
		b.WriteString("queued\n")
		fmt.Fprintf(&b, "pool: %s\n", poolLine(h.pool))
	case "step":
		stops := strings.Split(args["stop"], ",")
		rd := h.s.Ready()
		for _, ev := range h.s.Events() {
			b.WriteString(eventLine(ev))
		}
		if len(rd.Scrub) > 0 {
			s := slices.Clone(rd.Scrub)
			slices.Sort(s)
			fmt.Fprintf(&b, "scrub %v\n", s)
		}
		var res []Result
		for _, it := range rd.Batch {
			kind := "prefill"
			if len(it.Tokens) == 1 && it.Pos > 0 && it.Logits && !strings.Contains(b.String(), "item "+string(it.ID)+" ") && h.isDecode(it) {
				kind = "decode"
			}
			fmt.Fprintf(&b, "item %s %s pos=%d n=%d pages=%d", it.ID, kind, it.Pos, len(it.Tokens), it.Table.Len())
			if it.Logits {
				b.WriteString(" logits")
				res = append(res, Result{ID: it.ID, Token: 7, Stop: slices.Contains(stops, string(it.ID))})
			}
			b.WriteString("\n")
		}
		for _, ev := range h.s.Advance(rd, res) {
			b.WriteString(eventLine(ev))
		}
		fmt.Fprintf(&b, "pool: %s\n", poolLine(h.pool))
	case "cancel":
		ev, ok := h.s.Cancel(cloison.RequestID(f[1]), ErrCanceled)
		if !ok {
			b.WriteString("unknown\n")
			break
		}
		b.WriteString(eventLine(ev))
		fmt.Fprintf(&b, "pool: %s\n", poolLine(h.pool))
	case "state":
		ids := make([]string, 0, len(h.s.seqs))
		for id := range h.s.seqs {
			ids = append(ids, string(id))
		}
		slices.Sort(ids)
		for _, id := range ids {
			q := h.s.seqs[cloison.RequestID(id)]
			fmt.Fprintf(&b, "%s %s computed=%d generated=%d\n", id, q.state, q.computed, q.generated)
		}
		fmt.Fprintf(&b, "pool: %s\n", poolLine(h.pool))
	case "counters":
		ids := make([]string, 0, len(h.s.vtc))
		for id := range h.s.vtc {
			ids = append(ids, string(id))
		}
		slices.Sort(ids)
		for _, id := range ids {
			fmt.Fprintf(&b, "%s=%g ", id, h.s.vtc[cloison.TenantID(id)])
		}
		b.WriteString("\n")
	default:
		h.t.Fatalf("unknown command %q", f[0])
	}
	if err := h.pool.Check(); err != nil {
		h.t.Fatalf("%s: %v", cmd, err)
	}
	return b.String()
}

func (h *harness) isDecode(it Item) bool {
	q := h.s.seqs[it.ID]
	return q == nil || q.generated > 0
}

func cmp(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

func poolLine(p *isolation.Pool) string {
	st := p.Stats()
	parts := []string{fmt.Sprintf("free=%d leased=%d cached=%d quarantined=%d", st.Free, st.Leased, st.Cached, st.Quarantined)}
	for _, ts := range st.Tenants {
		if ts.Leased > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", ts.Tenant, ts.Leased))
		}
	}
	return strings.Join(parts, " ")
}

func eventLine(ev Event) string {
	s := fmt.Sprintf("event %s %s", ev.ID, ev.State)
	if ev.Finish != "" {
		s += " " + string(ev.Finish)
	}
	if ev.Err != nil {
		s += " " + string(cloison.ErrorCode(ev.Err))
	}
	if ev.State != Queued {
		s += fmt.Sprintf(" generated=%d", ev.Generated)
	} else {
		s += fmt.Sprintf(" preemptions=%d", ev.Preemptions)
	}
	return s + "\n"
}
