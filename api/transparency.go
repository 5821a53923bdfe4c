package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloison/cloison/service"
)

// Transparency is the node's view of its transparency log beyond the
// ledger (the node: its ledger and its witnesses). The metrics read what
// it refused at scrape time, and GET /compliance/v1/tlog/checkpoint?witnesses=K
// asks the witnesses through it (service.Witnesses). Optional: without it
// the signing series read 0, there are no witness series, and the route
// serves the cosignatures the ledger stored.
type Transparency interface {
	service.Witnesses
	// SigningRefusals is how often the ledger refused to sign a tree or
	// chain head contradicting a checkpoint known outside its database,
	// and whether a refusal is in force (nothing is signed until the
	// database is restored and the node restarted).
	SigningRefusals() (count uint64, refusing bool)
	// WitnessStats is each configured witness's counts, in a fixed order.
	WitnessStats() []WitnessStat
}

// WitnessStat is one witness's submission counts (audit/witness Stat).
type WitnessStat struct {
	Witness  string
	Size     uint64 // the size it last cosigned, as the submitter knows
	Cosigned uint64 // checkpoints it cosigned
	Refused  uint64 // refusals: it holds a tree the log contradicts
	Failures uint64 // no usable answer
}

var (
	descSignRefusals = prometheus.NewDesc("cloison_ledger_signing_refusals_total",
		"Times the ledger refused to sign a tree or chain head that contradicts a checkpoint known outside its database (state directory, witnesses): a rewritten, rolled-back or truncated database.", nil, nil)
	descSignRefused = prometheus.NewDesc("cloison_ledger_signing_refused",
		"1 while the ledger refuses to sign (no checkpoint, cosignature or proof is served: fail closed), else 0.", nil, nil)
	descWitnessRefused = prometheus.NewDesc("cloison_witness_refusals_total",
		"Checkpoints a witness refused to cosign because it cosigned a tree the log contradicts (smaller tree, fork).", []string{"witness"}, nil)
	descWitnessFailures = prometheus.NewDesc("cloison_witness_failures_total",
		"Submissions to a witness that got no usable answer (unreachable, a 5xx, an invalid cosignature).", []string{"witness"}, nil)
	descWitnessCosigned = prometheus.NewDesc("cloison_witness_cosignatures_total",
		"Checkpoints a witness cosigned.", []string{"witness"}, nil)
)

// transparencyCollector reads Config.Transparency at scrape time. The
// signing series are always present (0 without a source) and each witness's
// series from the start, so increase() sees the first refusal.
type transparencyCollector struct{ s *Server }

func (c transparencyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSignRefusals, descSignRefused, descWitnessRefused, descWitnessFailures, descWitnessCosigned} {
		ch <- d
	}
}

func (c transparencyCollector) Collect(ch chan<- prometheus.Metric) {
	var n uint64
	var refusing bool
	var ws []WitnessStat
	if t := c.s.cfg.Transparency; t != nil {
		n, refusing = t.SigningRefusals()
		ws = t.WitnessStats()
	}
	on := 0.0
	if refusing {
		on = 1
	}
	ch <- prometheus.MustNewConstMetric(descSignRefusals, prometheus.CounterValue, float64(n))
	ch <- prometheus.MustNewConstMetric(descSignRefused, prometheus.GaugeValue, on)
	for _, w := range ws {
		ch <- prometheus.MustNewConstMetric(descWitnessRefused, prometheus.CounterValue, float64(w.Refused), w.Witness)
		ch <- prometheus.MustNewConstMetric(descWitnessFailures, prometheus.CounterValue, float64(w.Failures), w.Witness)
		ch <- prometheus.MustNewConstMetric(descWitnessCosigned, prometheus.CounterValue, float64(w.Cosigned), w.Witness)
	}
}
