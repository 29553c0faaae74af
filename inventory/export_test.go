package inventory

// Waiting is how many orders wait in the queue of variant's lock on sku, for
// tests that form a batch by holding the lock while orders queue.
func Waiting(s *Service, variant, sku string) int {
	s.queues.mu.Lock()
	defer s.queues.mu.Unlock()
	if queue, ok := s.queues.queues[variant+" "+sku]; ok {
		return len(queue.waiting)
	}
	return 0
}
