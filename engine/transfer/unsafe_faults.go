//go:build faults

package transfer

// ReceiverUnsafe names the receiver's checks that tests may switch off; the
// switches exist only in a build with the faults tag.
type ReceiverUnsafe struct {
	// SkipCountCheck accepts a header whose tokens or pages differ from the
	// reservation, and a trailer after fewer pages than announced (the
	// 2026 "transfer complete" for a one-page placeholder).
	SkipCountCheck bool
	// SkipDigestCheck accepts pages whose digest does not match, a trailer
	// whose digest list differs from the pages received, and a manifest MAC
	// that does not verify (the MAC covers the digests).
	SkipDigestCheck bool
}

func (u ReceiverUnsafe) skipCountCheck() bool  { return u.SkipCountCheck }
func (u ReceiverUnsafe) skipDigestCheck() bool { return u.SkipDigestCheck }

// SenderUnsafe reproduces the 2026 prefill node (faults builds only).
type SenderUnsafe struct {
	// ClaimReservation: Send announces the reservation's tokens and pages
	// whatever the lease wrote, streams only the pages of the positions it
	// did write (a one-token placeholder: one page), and ignores what the
	// receipt says. The decode node's checks must refuse it.
	ClaimReservation bool
}

func (u SenderUnsafe) claimReservation() bool { return u.ClaimReservation }
