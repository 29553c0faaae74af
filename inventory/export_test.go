package inventory

// Waiting is how many orders wait in the line of variant's lock on sku, for
// tests that form a batch by holding the lock while orders queue.
func Waiting(s *Service, variant, sku string) int {
	s.lines.mu.Lock()
	defer s.lines.mu.Unlock()
	if line, ok := s.lines.lines[variant+" "+sku]; ok {
		return len(line.waiting)
	}
	return 0
}
