package modelserver

// Test-only API: what the server refused or could not understand. The
// relay's verification reads only Requests.

// Refused returns how many requests were refused for a missing or wrong
// key.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Errors returns the requests the server could not understand.
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errs...)
}
