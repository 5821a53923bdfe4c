package api

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// Every accepted tile path is the one canonical spelling of its tile
// (tlog.Tile.Path, without the height), so one resource has one path and
// one cache entry.
func FuzzParseTilePath(f *testing.F) {
	for _, p := range []string{"0/000", "0/001.p/7", "1/x001/234.p/255", "entries/000", "entries/x002/000.p/3", "63/000", "0/0", "00/000", "0/000.p/256", "entries"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tile, entries, ok := parseTilePath(p)
		if !ok {
			return
		}
		if tile.W < 1 || tile.W > 256 || tile.L < 0 || tile.L > 63 || tile.N < 0 {
			t.Fatalf("%q: tile %+v", p, tile)
		}
		want := strings.TrimPrefix(tlog.Tile{H: 8, L: tile.L, N: tile.N, W: tile.W}.Path(), "tile/8/"+strconv.Itoa(tile.L)+"/")
		if entries {
			want = "entries/" + want
		} else {
			want = strconv.Itoa(tile.L) + "/" + want
		}
		if want != p {
			t.Fatalf("%q accepted, canonical %q", p, want)
		}
	})
}
