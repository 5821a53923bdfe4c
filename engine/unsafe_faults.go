//go:build faults

package engine

// Unsafe holds the engine's test-only faults; it exists only in a build with
// the faults tag (the ablation suites). Each config type that carries it
// reads only its own switch.
type Unsafe struct {
	// SkipLengthCheck (AdmissionConfig, Config) turns admission's length
	// checks off.
	SkipLengthCheck bool
	// PlaceholderOver (SchedulerConfig) emulates the 2026 bug: a prompt
	// longer than this many tokens is "rejected" and replaced by a
	// one-token placeholder, yet the lease keeps its full reservation and
	// the request goes on as if its whole prompt had been computed. 0
	// disables.
	PlaceholderOver int
	// SkipCountCheck (Remote) decodes without checking that the pool
	// recorded every reserved token after the transfer.
	SkipCountCheck bool
	// Placeholder (PrefillRunner) replaces a prompt its pool cannot hold by
	// a one-token placeholder sent as the whole prompt.
	Placeholder bool
}

func (u Unsafe) skipLengthCheck() bool { return u.SkipLengthCheck }
func (u Unsafe) placeholderOver() int  { return u.PlaceholderOver }
func (u Unsafe) skipCountCheck() bool  { return u.SkipCountCheck }
func (u Unsafe) placeholder() bool     { return u.Placeholder }
