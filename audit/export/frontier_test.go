package export

import (
	"testing"

	"golang.org/x/mod/sumdb/tlog"
	"pgregory.net/rapid"
)

// The incremental root equals tlog.TreeHash for every size, from the
// first leaf or from a prefix of complete subtrees.
func TestFrontierMatchesTlog(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(1, 300).Draw(t, "n")
		k := rapid.Int64Range(0, n).Draw(t, "prefix")
		var stored []tlog.Hash
		for i := int64(0); i < n; i++ {
			hs, err := tlog.StoredHashes(i, []byte{byte(i >> 8), byte(i)}, tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
				out := make([]tlog.Hash, len(ix))
				for j, x := range ix {
					out[j] = stored[x]
				}
				return out, nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, hs...)
		}
		r := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(ix))
			for j, x := range ix {
				out[j] = stored[x]
			}
			return out, nil
		})
		f := &frontier{}
		levels, indexes := PrefixSubtrees(uint64(k))
		for i := range levels {
			h, err := r.ReadHashes([]int64{tlog.StoredHashIndex(levels[i], indexes[i])})
			if err != nil {
				t.Fatal(err)
			}
			f.levels, f.hashes = append(f.levels, levels[i]), append(f.hashes, h[0])
		}
		f.size = uint64(k)
		for i := k; i < n; i++ {
			f.push(tlog.RecordHash([]byte{byte(i >> 8), byte(i)}))
			want, err := tlog.TreeHash(i+1, r)
			if err != nil {
				t.Fatal(err)
			}
			if f.root() != want {
				t.Fatalf("size %d from prefix %d: root differs from tlog.TreeHash", i+1, k)
			}
		}
	})
}
