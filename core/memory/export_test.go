package memory

// Watchers returns the number of watches still registered, for tests.
func (s *Server) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, set := range s.watchers {
		n += len(set)
	}
	return n
}
