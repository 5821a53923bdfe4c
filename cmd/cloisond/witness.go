package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/cloison/cloison/audit/witness"
)

// witnessConfig is --witness URL=VKEY (repeatable) and --witness-interval:
// the witnesses every newly signed tree checkpoint is submitted to
// (package audit/witness). Their cosignatures are stored with the
// checkpoint (tlog_cosignatures); Store.CosignedCheckpoint publishes the
// latest. A witness that is down or refuses is logged and counted, and
// never holds up an append.
type witnessConfig struct {
	specs    []string
	interval time.Duration
}

func (w *witnessConfig) flags(fs *flag.FlagSet) {
	fs.Func("witness", "submit tree checkpoints to the C2SP tlog-witness at URL whose cosignature key is VKEY: URL=VKEY (repeatable)", func(v string) error {
		if _, _, err := parseWitnessSpec(v); err != nil {
			return err
		}
		w.specs = append(w.specs, v)
		return nil
	})
	fs.DurationVar(&w.interval, "witness-interval", time.Second, "how often the latest tree checkpoint is offered to the witnesses")
}

func parseWitnessSpec(v string) (url, vkey string, err error) {
	url, vkey, ok := strings.Cut(v, "=")
	if !ok || url == "" || vkey == "" {
		return "", "", fmt.Errorf("--witness %q: want URL=VKEY", v)
	}
	if _, err := witness.NewClient(url, vkey, 0, nil); err != nil {
		return "", "", fmt.Errorf("--witness %q: %w", v, err)
	}
	return url, vkey, nil
}

// clients are the witnesses --witness names (node.Spec.Witnesses).
func (w witnessConfig) clients() ([]*witness.Client, error) {
	var out []*witness.Client
	for _, s := range w.specs {
		url, wkey, err := parseWitnessSpec(s)
		if err != nil {
			return nil, err
		}
		c, err := witness.NewClient(url, wkey, 0, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
