package jetstream

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// jsAccount is JetStream inside one account: its streams and its API.
type jsAccount struct {
	e   *Engine
	acc Account

	// create serialises stream creation, update and deletion, so name and
	// subject checks cannot race.
	create sync.Mutex
	mu     struct {
		sync.Mutex
		streams map[string]*stream // by name; guarded by mu
	}
	apiTotal, apiErrors atomic.Uint64
	unsubs              []func()
}

// EnableAccount turns JetStream on for acc: its API starts answering and
// the streams it had before a restart capture messages again.
func (e *Engine) EnableAccount(acc Account) error {
	a := &jsAccount{e: e, acc: acc}
	a.mu.streams = map[string]*stream{}
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return api.NewNotEnabledError()
	}
	if _, dup := e.mu.accounts[acc.Name()]; dup {
		e.mu.Unlock()
		return fmt.Errorf("jetstream: account %q already enabled", acc.Name())
	}
	e.mu.accounts[acc.Name()] = a
	recovered := e.mu.recovered[acc.Name()]
	delete(e.mu.recovered, acc.Name())
	e.mu.Unlock()

	for _, s := range recovered {
		if err := a.attach(s); err != nil {
			return err
		}
	}
	prefixes := []string{"$JS.API.>"}
	if d := e.opts.Domain; d != "" {
		prefixes = append(prefixes, "$JS."+d+".API.>")
	}
	for _, p := range prefixes {
		unsub, err := acc.SubscribeInternal(p, a.onAPI)
		if err != nil {
			return fmt.Errorf("jetstream: account %q api: %w", acc.Name(), err)
		}
		a.unsubs = append(a.unsubs, unsub)
	}
	return nil
}

// attach makes s live in the account: named, and capturing its subjects.
func (a *jsAccount) attach(s *stream) error {
	cfg := s.config()
	for _, subj := range cfg.Subjects {
		unsub, err := a.acc.SubscribeInternal(subj, s.capture(a))
		if err != nil {
			s.detach()
			return fmt.Errorf("jetstream: stream %q subject %q: %w", cfg.Name, subj, err)
		}
		s.unsubs = append(s.unsubs, unsub)
	}
	a.mu.Lock()
	a.mu.streams[cfg.Name] = s
	a.mu.Unlock()
	s.mu.Lock()
	s.armTimerLocked()
	s.mu.Unlock()
	recovered := s.recovered
	s.recovered = nil
	for _, c := range recovered {
		c.a = a
		if err := a.startConsumer(c); err != nil {
			return fmt.Errorf("jetstream: consumer %q: %w", c.name, err)
		}
	}
	return nil
}

// detach stops s capturing messages.
func (s *stream) detach() {
	for _, u := range s.unsubs {
		u()
	}
	s.unsubs = nil
}

func (a *jsAccount) disable() {
	for _, u := range a.unsubs {
		u()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.mu.streams {
		s.detach()
		s.mu.Lock()
		if s.mu.timer != nil {
			s.mu.timer.Stop()
		}
		cons := s.consumersLocked()
		s.mu.Unlock()
		for _, c := range cons {
			c.stop()
		}
	}
}

func (a *jsAccount) lookup(name string) *stream {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.streams[name]
}

// sortedStreams lists the account's streams by name.
func (a *jsAccount) sortedStreams() []*stream {
	a.mu.Lock()
	list := make([]*stream, 0, len(a.mu.streams))
	for _, s := range a.mu.streams {
		list = append(list, s)
	}
	a.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name() < list[j].name() })
	return list
}

// configsExcept returns every other stream's config, for overlap checks.
func (a *jsAccount) configsExcept(name string) [][]string {
	var out [][]string
	for _, s := range a.sortedStreams() {
		if cfg := s.config(); cfg.Name != name {
			out = append(out, cfg.Subjects)
		}
	}
	return out
}

// reservations sums the max_bytes the account's streams reserve, by
// storage type, as nats-server reports them in account info.
func (a *jsAccount) reservations() (memory, file uint64) {
	for _, s := range a.sortedStreams() {
		cfg := s.config()
		if cfg.MaxBytes <= 0 {
			continue
		}
		if cfg.Storage == api.MemoryStorage {
			memory += uint64(cfg.MaxBytes)
		} else {
			file += uint64(cfg.MaxBytes)
		}
	}
	return memory, file
}

// usage sums what the account's streams hold, by storage type.
func (a *jsAccount) usage() (memory, file uint64, streams int) {
	for _, s := range a.sortedStreams() {
		s.mu.Lock()
		if s.mu.cfg.Storage == api.MemoryStorage {
			memory += s.mu.state.Bytes
		} else {
			file += s.mu.state.Bytes
		}
		s.mu.Unlock()
		streams++
	}
	return memory, file, streams
}
