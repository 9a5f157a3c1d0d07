package memstore

import "hash/maphash"

// PrincipalUsage returns the records and bytes the store accounts to
// principal, over its shards.
func (s *Store) PrincipalUsage(principal string) (records int, bytes int64) {
	ph := maphash.String(s.seed, principal)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if t := sh.pr.find(ph); t != 0 {
			records += sh.pr.accts[t].records
			bytes += sh.pr.accts[t].bytes
		}
		sh.mu.Unlock()
	}
	return records, bytes
}
