package store

import "fmt"

// Sync makes every batch committed so far durable. A caller that commits
// several batches without sync (to read its own writes between them) calls
// Sync once before acknowledging any of them.
func (s *Store) Sync() error {
	if err := s.life.acquire(); err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	defer s.life.release()
	if err := s.eng.sync(); err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	return nil
}
