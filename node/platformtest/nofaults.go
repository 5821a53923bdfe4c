//go:build !faults

package platformtest

import (
	"errors"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
)

// faults is empty in the default build: its types have no switches.
type faults struct {
	kernels kernels.Unsafe
	pool    isolation.Unsafe
	engine  engine.Unsafe
	recv    transfer.ReceiverUnsafe
	sender  transfer.SenderUnsafe
	attest  node.AttestUnsafe
}

// errNoFaults: Options switch a defence off, which only a faults build can.
var errNoFaults = errors.New("platformtest: Options switch a defence off; only a build with -tags faults can (make test runs those suites)")

// faultsOf fails closed: a suite that asks for a fault in the default build
// fails instead of running with every defence on and passing vacuously.
func faultsOf(o Options) (faults, error) {
	sp := o.Split
	if sp == nil {
		sp = &Split{}
	}
	if o.PlaceholderOver != 0 || o.SkipFillCheck || o.SkipScrub || o.SkipKernelCheck || o.SkipAdmission ||
		sp.SkipAttestation || sp.Placeholder || sp.SkipCountCheck || sp.SkipDecodeCount || sp.SkipDigestCheck {
		return faults{}, errNoFaults
	}
	return faults{}, nil
}
