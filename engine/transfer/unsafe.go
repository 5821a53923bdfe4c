//go:build !faults

package transfer

// ReceiverUnsafe is empty in the default build: every receiver check runs.
// The switches exist only with the faults build tag (unsafe_faults.go).
type ReceiverUnsafe struct{}

func (ReceiverUnsafe) skipCountCheck() bool  { return false }
func (ReceiverUnsafe) skipDigestCheck() bool { return false }

// SenderUnsafe is empty in the default build.
type SenderUnsafe struct{}

func (SenderUnsafe) claimReservation() bool { return false }
