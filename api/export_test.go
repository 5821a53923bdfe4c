package api

import "github.com/cloison/cloison"

// HoldStreams takes n of s's stream-gate slots for tenant t, as n
// generations in flight would, until release (tests of the gate through
// the real request path).
func HoldStreams(s *Server, t cloison.TenantID, n int) (release func(), err error) {
	var rels []func()
	release = func() {
		for _, r := range rels {
			r()
		}
	}
	for i := 0; i < n; i++ {
		r, err := s.gate.acquire(t)
		if err != nil {
			release()
			return nil, err
		}
		rels = append(rels, r)
	}
	return release, nil
}
