package api

// Choices (n > 1): one request, n sequences of the engine (run by
// service.Requests.Generate, each with its own seed), each decoded here
// with its own grammar matcher and tool-call parser and answered with its
// own index.

// DefaultMaxN is Config.MaxN's default.
const DefaultMaxN = 8

// choices is the number of choices the request asks for (n; 1 if absent).
func (in inference) choices() int {
	if in.common.N == nil {
		return 1
	}
	return *in.common.N
}

// checkN refuses an n outside [1, MaxN]. Errors: ErrBadField.
func (s *Server) checkN(c *Common) error {
	if c.N == nil {
		return nil
	}
	if *c.N < 1 || *c.N > s.cfg.MaxN {
		return ErrBadField.Withf("n must be in [1, %d] on this server (got %d)", s.cfg.MaxN, *c.N)
	}
	return nil
}
