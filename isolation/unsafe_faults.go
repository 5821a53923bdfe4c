//go:build faults

package isolation

// Unsafe holds test-only switches that disable one defence each. They exist
// only in a build with the faults tag (the ablation suites); the default
// build's Unsafe has no fields.
type Unsafe struct {
	// SkipFillCheck lets BlockTable approve slots that were never written
	// in the current epoch (the 2026 failure).
	SkipFillCheck bool
	// SkipScrub returns freed pages to the common free list without zeroing,
	// whatever the zeroing mode.
	SkipScrub bool
}

func (u Unsafe) skipFillCheck() bool { return u.SkipFillCheck }
func (u Unsafe) skipScrub() bool     { return u.SkipScrub }
