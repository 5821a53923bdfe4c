package pgtest

import "fmt"

// TruncateTreeSQL returns the statements that cut the global tree's tiles
// (tlog_tiles, migration 00024) back to the tree of size leaves, as an
// owner rolling the tree back would: the partial tiles of that size are
// written from the wider rows that hold their hashes, then every row
// holding a hash beyond it is deleted. Run them with tlog_tiles' triggers
// disabled.
func TruncateTreeSQL(size int64) []string {
	return []string{
		fmt.Sprintf(`INSERT INTO tlog_tiles (level, n, width, hashes)
SELECT DISTINCT ON (t.level) t.level, t.n, ((%[1]d::bigint >> (8 * t.level)) & 255)::integer,
       substring(t.hashes FROM 1 FOR 32 * ((%[1]d::bigint >> (8 * t.level)) & 255)::integer)
FROM tlog_tiles t
WHERE t.n = (%[1]d::bigint >> (8 * t.level)) >> 8 AND ((%[1]d::bigint >> (8 * t.level)) & 255) > 0
  AND t.width > ((%[1]d::bigint >> (8 * t.level)) & 255)
ORDER BY t.level, t.width DESC
ON CONFLICT DO NOTHING`, size),
		fmt.Sprintf("DELETE FROM tlog_tiles WHERE n * 256 + width > (%d::bigint >> (8 * level))", size),
	}
}
