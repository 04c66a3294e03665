package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/jwt/v2"
)

// memResolver is an in-memory Resolver for tests: JWTs by account key.
type memResolver struct {
	mu   sync.Mutex
	jwts map[string]string // guarded by mu
}

func newMemResolver() *memResolver { return &memResolver{jwts: map[string]string{}} }

func (m *memResolver) Fetch(_ context.Context, account string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.jwts[account]; ok {
		return t, nil
	}
	return "", fmt.Errorf("account %s: %w", account, ErrUnknownAccount)
}

// Store keeps the newer JWT by iat, as Resolver requires.
func (m *memResolver) Store(account, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.jwts[account]; ok && iat(old) > iat(token) {
		return fmt.Errorf("account %s: stored jwt is newer", account)
	}
	m.jwts[account] = token
	return nil
}

func iat(token string) int64 {
	c, err := jwt.DecodeGeneric(token)
	if err != nil {
		return 0
	}
	return c.IssuedAt
}

func (m *memResolver) Delete(account string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.jwts, account)
	return nil
}

func (m *memResolver) Stored() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.jwts))
	for k := range m.jwts {
		keys = append(keys, k)
	}
	return keys
}
