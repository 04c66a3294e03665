package jetstream

import (
	"slices"
	"strings"

	"github.com/RaduBerinde/btreemap"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/subject"
)

// streamIndex holds an account's attached streams, indexed so that no
// stream request costs in proportion to how many streams the account
// has: by name (lookups), in name order (STREAM.NAMES and STREAM.LIST
// paging), by subject (overlap checks and subject filters), and counted
// by replica count (max_streams).
//
// A stream being created is pending until its record is durable: filed
// with its subjects and counted, so no other create can take them, and
// its name in pending, so a create of the same name waits; but not in
// byName or ordered, so nothing else sees it.
//
// Invariant: byName and ordered hold the filed streams that are not
// pending, pending the names of those that are; subjects holds exactly
// filed[s].subjects for each filed stream s, and perReplicas[r] counts
// the filed streams with replica count r. A stream is filed with the
// config it was attached with; an update files it again.
//
// Not safe for concurrent use: the account's mu guards it. It never
// locks a stream, so it can be used with the account's mu held.
type streamIndex struct {
	byName      map[string]*stream
	ordered     *btreemap.BTreeMap[string, *stream]
	subjects    *subject.Index[*stream]
	filed       map[*stream]filing
	perReplicas map[int]int
	// pending maps the name of each pending stream to it and a channel
	// closed when it stops being pending (created or failed).
	pending map[string]pendingStream
}

// pendingStream is a stream being created and what its end closes.
type pendingStream struct {
	s    *stream
	done chan struct{}
}

// filing is what a stream was indexed under, so it can be taken out again
// after its config changed.
type filing struct {
	name     string
	subjects []string
	replicas int
	pending  bool
}

// newStreamIndex returns an empty index with room for n streams.
func newStreamIndex(n int) *streamIndex {
	return &streamIndex{
		byName:      make(map[string]*stream, n),
		ordered:     btreemap.New[string, *stream](32, strings.Compare),
		subjects:    subject.NewIndex[*stream](),
		filed:       make(map[*stream]filing, n),
		perReplicas: map[int]int{},
		pending:     map[string]pendingStream{},
	}
}

// put files s under cfg, replacing what it was filed under before (and
// ending its pending state).
func (x *streamIndex) put(s *stream, cfg *api.StreamConfig) {
	x.file(s, cfg, false)
	x.byName[cfg.Name] = s
	x.ordered.ReplaceOrInsert(cfg.Name, s)
}

// reserve files s, being created, as pending under cfg.
func (x *streamIndex) reserve(s *stream, cfg *api.StreamConfig) {
	x.file(s, cfg, true)
	x.pending[cfg.Name] = pendingStream{s: s, done: make(chan struct{})}
}

func (x *streamIndex) file(s *stream, cfg *api.StreamConfig, pending bool) {
	x.remove(s)
	f := filing{name: cfg.Name, subjects: slices.Clone(cfg.Subjects), replicas: max(cfg.Replicas, 1), pending: pending}
	for _, subj := range f.subjects {
		// Stream subjects were validated as filters; an invalid one could
		// capture nothing and so overlaps nothing either.
		_ = x.subjects.Insert(subj, "", s)
	}
	x.filed[s] = f
	x.perReplicas[f.replicas]++
}

// holds reports whether the stream filed under name, made or pending,
// is the one with id.
func (x *streamIndex) holds(name string, id uint64) bool {
	if s := x.byName[name]; s != nil {
		return s.id == id
	}
	p, ok := x.pending[name]
	return ok && p.s.id == id
}

// remove takes s out of the index, if it is there.
func (x *streamIndex) remove(s *stream) {
	f, ok := x.filed[s]
	if !ok {
		return
	}
	for _, subj := range f.subjects {
		x.subjects.Remove(subj, "", s)
	}
	if f.pending {
		close(x.pending[f.name].done)
		delete(x.pending, f.name)
	} else {
		delete(x.byName, f.name)
		x.ordered.Delete(f.name)
	}
	delete(x.filed, s)
	if x.perReplicas[f.replicas]--; x.perReplicas[f.replicas] == 0 {
		delete(x.perReplicas, f.replicas)
	}
}

// overlaps reports whether any of subjects overlaps a subject of a stream
// other than except (nil: any stream).
func (x *streamIndex) overlaps(subjects []string, except *stream) bool {
	found := false
	for _, subj := range subjects {
		x.subjects.Overlapping(subj, func(o *stream) bool {
			found = o != except
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// sorted lists the streams in name order.
func (x *streamIndex) sorted() []*stream {
	out := make([]*stream, 0, len(x.byName))
	for _, s := range x.ordered.Ascend(btreemap.Min[string](), btreemap.Max[string]()) {
		out = append(out, s)
	}
	return out
}

// matching lists, in name order, the streams with a subject overlapping
// filter ("" for all of them). Without a filter it reads the name order;
// with one it sorts only the streams the filter selects.
func (x *streamIndex) matching(filter string) []*stream {
	if filter == "" {
		return x.sorted()
	}
	seen := map[*stream]bool{}
	var out []*stream
	x.subjects.Overlapping(filter, func(s *stream) bool {
		if !seen[s] && !x.filed[s].pending {
			seen[s] = true
			out = append(out, s)
		}
		return true
	})
	slices.SortFunc(out, func(a, b *stream) int { return strings.Compare(x.filed[a].name, x.filed[b].name) })
	return out
}

// count is how many streams, pending ones included, count against tier
// ("" counts them all).
func (x *streamIndex) count(tier string) int {
	if tier == "" {
		return len(x.filed)
	}
	n := 0
	for r, c := range x.perReplicas {
		if inTier(tier, r) {
			n += c
		}
	}
	return n
}
