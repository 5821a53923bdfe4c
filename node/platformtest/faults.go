//go:build faults

package platformtest

import (
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
)

// faults are the defence switches Options asks for, in the types of the
// packages that own them (faults builds only).
type faults struct {
	kernels kernels.Unsafe
	pool    isolation.Unsafe
	engine  engine.Unsafe // each engine type reads only its own switch
	recv    transfer.ReceiverUnsafe
	sender  transfer.SenderUnsafe
	attest  node.AttestUnsafe // both nodes' capacity attestation
}

func faultsOf(o Options) (faults, error) {
	f := faults{
		kernels: kernels.Unsafe{SkipOwnershipChecks: o.SkipKernelCheck},
		pool:    isolation.Unsafe{SkipFillCheck: o.SkipFillCheck, SkipScrub: o.SkipScrub},
		engine:  engine.Unsafe{SkipLengthCheck: o.SkipAdmission, PlaceholderOver: o.PlaceholderOver},
	}
	if sp := o.Split; sp != nil {
		f.engine.Placeholder, f.engine.SkipCountCheck = sp.Placeholder, sp.SkipDecodeCount
		f.recv = transfer.ReceiverUnsafe{SkipCountCheck: sp.SkipCountCheck, SkipDigestCheck: sp.SkipDigestCheck}
		f.sender = transfer.SenderUnsafe{ClaimReservation: sp.Placeholder}
		f.attest = node.AttestUnsafe{SkipAttestation: sp.SkipAttestation}
	}
	return f, nil
}
