package export

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison/audit"
)

// frontier computes an RFC 6962 Merkle tree hash incrementally: the
// complete subtrees of the leaves pushed so far, largest (leftmost) first.
type frontier struct {
	size   uint64
	levels []int
	hashes []tlog.Hash
}

func (f *frontier) push(h tlog.Hash) {
	f.size++
	f.levels, f.hashes = append(f.levels, 0), append(f.hashes, h)
	for n := len(f.levels); n >= 2 && f.levels[n-1] == f.levels[n-2]; n = len(f.levels) {
		f.hashes[n-2] = tlog.NodeHash(f.hashes[n-2], f.hashes[n-1])
		f.levels[n-2]++
		f.levels, f.hashes = f.levels[:n-1], f.hashes[:n-1]
	}
}

// root is the tree hash of the leaves pushed (RFC 6962: the right subtrees
// folded into the left ones).
func (f *frontier) root() tlog.Hash {
	if len(f.hashes) == 0 {
		return tlog.Hash{}
	}
	r := f.hashes[len(f.hashes)-1]
	for i := len(f.hashes) - 2; i >= 0; i-- {
		r = tlog.NodeHash(f.hashes[i], r)
	}
	return r
}

// PrefixSubtrees returns the (level, index) of the complete subtrees that
// cover the first n leaves, largest first: what tree-prefix.txt lists.
func PrefixSubtrees(n uint64) (levels []int, indexes []int64) {
	var start uint64
	for l := 63; l >= 0; l-- {
		if n&(1<<uint(l)) != 0 {
			levels = append(levels, l)
			indexes = append(indexes, int64(start>>uint(l)))
			start += 1 << uint(l)
		}
	}
	return levels, indexes
}

// WriteTreePrefix writes tree-prefix.txt: one "<level> <index> <hex hash>"
// line per complete subtree covering the entries before the export.
func WriteTreePrefix(w io.Writer, levels []int, indexes []int64, hashes []tlog.Hash) error {
	bw := bufio.NewWriter(w)
	for i := range levels {
		fmt.Fprintf(bw, "%d %d %s\n", levels[i], indexes[i], audit.Digest(hashes[i]))
	}
	return bw.Flush()
}

// readPrefix loads tree-prefix.txt for the first n leaves. The hashes are
// not trusted: the root they give with the exported entries must be the
// signed checkpoint's.
func (f *frontier) readPrefix(dir string, n uint64) error {
	b, err := os.ReadFile(filepath.Join(dir, TreePrefix))
	if err != nil {
		return fmt.Errorf("%w: an export starting at seq %d needs %s: %v", ErrVerify, n+1, TreePrefix, err)
	}
	levels, indexes := PrefixSubtrees(n)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(levels) || !strings.HasSuffix(string(b), "\n") {
		return fmt.Errorf("%w: %s has %d lines, %d subtrees cover %d entries", ErrVerify, TreePrefix, len(lines), len(levels), n)
	}
	for i, line := range lines {
		parts := strings.Split(line, " ")
		if len(parts) != 3 || parts[0] != strconv.Itoa(levels[i]) || parts[1] != strconv.FormatInt(indexes[i], 10) {
			return fmt.Errorf("%w: %s line %d: want subtree %d %d", ErrVerify, TreePrefix, i+1, levels[i], indexes[i])
		}
		d, err := audit.ParseDigest(parts[2])
		if err != nil {
			return fmt.Errorf("%w: %s line %d: %v", ErrVerify, TreePrefix, i+1, err)
		}
		f.levels, f.hashes = append(f.levels, levels[i]), append(f.hashes, tlog.Hash(d))
	}
	f.size = n
	return nil
}
