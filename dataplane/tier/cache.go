package tier

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Ref names one committed segment object: what a reader needs to fetch
// from it (the manifest holds it).
type Ref struct {
	Key      string
	Size     int64
	IndexOff int64
}

// CacheOptions configure a Cache.
type CacheOptions struct {
	// MaxBytes bounds the decoded blocks and indexes held; 0 means 64 MiB.
	MaxBytes int64
	// Timeout bounds one read, retries included: past it the read fails
	// (the object store is slow or down), it never waits forever.
	// 0 means 10 s.
	Timeout time.Duration
	// ReadRate caps the bytes per second fetched from the store; 0 is
	// no cap.
	ReadRate int64
	// ReadAhead is how many blocks after a sequentially read one are
	// fetched in the background; 0 means 2, negative none.
	ReadAhead int
}

// Cache is the node's shared read cache of cold blocks: every cold read
// goes through it. Readers of one block share one GET (the first fetches,
// the rest wait for it); blocks and indexes are evicted least recently
// used first once MaxBytes is passed. Every block is verified against
// its segment's footer before it is cached, so a reader gets the bytes
// that were uploaded or an error.
//
// Threading: safe for concurrent use.
type Cache struct {
	st   ObjectStore
	opts CacheOptions
	lim  limiter

	mu struct {
		sync.Mutex
		lru      *list.List             // of *centry, most recent first; guarded by mu
		entries  map[ckey]*list.Element // guarded by mu
		inflight map[ckey]*call         // guarded by mu
		used     int64                  // bytes held; guarded by mu
	}
	ahead chan struct{} // bounds background read-ahead fetches

	// Counters for /jsz and metrics.
	Hits, Misses, Gets, GetBytes, Errors atomic.Int64
}

type ckey struct {
	obj   string
	block int // -1: the index
}

type centry struct {
	k    ckey
	val  any // []byte or *Index
	size int64
}

type call struct {
	done chan struct{}
	val  any
	err  error
}

// NewCache returns a cache reading from st.
func NewCache(st ObjectStore, o CacheOptions) *Cache {
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = 2
	}
	c := &Cache{st: st, opts: o, ahead: make(chan struct{}, 4)}
	c.lim.rate = o.ReadRate
	c.mu.lru = list.New()
	c.mu.entries = map[ckey]*list.Element{}
	c.mu.inflight = map[ckey]*call{}
	return c
}

// Used is the bytes the cache holds.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.used
}

// Read returns the record of seq from the segment ref names. A message
// the segment does not hold is ErrNotFound; an object that is missing,
// short or fails a checksum is an error, never other bytes.
func (c *Cache) Read(ctx context.Context, ref Ref, seq uint64) (Record, error) {
	if r, ok, err := c.readCached(ref, seq); ok {
		return r, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	x, err := c.index(ctx, ref)
	if err != nil {
		return Record{}, err
	}
	e, ok := x.Find(seq)
	if !ok {
		return Record{}, fmt.Errorf("tier: %s holds no message %d: %w", ref.Key, seq, ErrNotFound)
	}
	b, err := c.block(ctx, ref, x, e.Block, true)
	if err != nil {
		return Record{}, err
	}
	return DecodeRecord(b, e)
}

// readCached answers from the cache alone when the segment's index and
// the record's block are both held: the path of a reader that read-ahead
// keeps ahead of. ok false sends the caller to the loading path.
func (c *Cache) readCached(ref Ref, seq uint64) (Record, bool, error) {
	c.mu.Lock()
	xe, ok := c.mu.entries[ckey{ref.Key, -1}]
	if !ok {
		c.mu.Unlock()
		return Record{}, false, nil
	}
	x := xe.Value.(*centry).val.(*Index)
	e, found := x.Find(seq)
	if !found {
		c.mu.Unlock()
		return Record{}, true, fmt.Errorf("tier: %s holds no message %d: %w", ref.Key, seq, ErrNotFound)
	}
	be, ok := c.mu.entries[ckey{ref.Key, e.Block}]
	if !ok {
		c.mu.Unlock()
		return Record{}, false, nil
	}
	c.mu.lru.MoveToFront(xe)
	c.mu.lru.MoveToFront(be)
	b := be.Value.(*centry).val.([]byte)
	c.mu.Unlock()
	c.Hits.Add(1)
	if e.Off == 0 && c.opts.ReadAhead > 0 {
		// Entering a block: keep the next ones coming.
		for j := e.Block + 1; j <= e.Block+c.opts.ReadAhead && j < len(x.Blocks); j++ {
			c.prefetch(ref, x, j)
		}
	}
	r, err := DecodeRecord(b, e)
	return r, true, err
}

func (c *Cache) index(ctx context.Context, ref Ref) (*Index, error) {
	v, err := c.get(ctx, ckey{ref.Key, -1}, func(ctx context.Context) (any, int64, error) {
		tail, err := c.fetch(ctx, ref.Key, ref.IndexOff, ref.Size-ref.IndexOff)
		if err != nil {
			return nil, 0, err
		}
		x, err := ParseTail(tail, ref.IndexOff, ref.Size)
		if err != nil {
			return nil, 0, fmt.Errorf("tier: %s: %w", ref.Key, err)
		}
		return x, x.size(), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Index), nil
}

func (c *Cache) block(ctx context.Context, ref Ref, x *Index, i int, readAhead bool) ([]byte, error) {
	k := ckey{ref.Key, i}
	missed := false
	v, err := c.get(ctx, k, func(ctx context.Context) (any, int64, error) {
		missed = true
		blk := x.Blocks[i]
		b, err := c.fetch(ctx, ref.Key, blk.Off, blk.Len)
		if err != nil {
			return nil, 0, err
		}
		if err := x.VerifyBlock(i, b); err != nil {
			return nil, 0, fmt.Errorf("tier: %s: %w", ref.Key, err)
		}
		return b, int64(len(b)), nil
	})
	if err != nil {
		return nil, err
	}
	// A reader of a block whose predecessor is cached (or of the first)
	// looks sequential: keep the next blocks coming before it asks.
	if readAhead && c.opts.ReadAhead > 0 && (i == 0 || !missed || c.has(ckey{ref.Key, i - 1})) {
		for j := i + 1; j <= i+c.opts.ReadAhead && j < len(x.Blocks); j++ {
			c.prefetch(ref, x, j)
		}
	}
	return v.([]byte), nil
}

// Prefetch loads a segment's index and first block in the background:
// a sequential reader nearing the end of one segment asks for the next.
func (c *Cache) Prefetch(ref Ref) {
	if c.opts.ReadAhead < 0 || c.has(ckey{ref.Key, 0}) {
		return
	}
	select {
	case c.ahead <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-c.ahead }()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
		defer cancel()
		if x, err := c.index(ctx, ref); err == nil && len(x.Blocks) > 0 {
			_, _ = c.block(ctx, ref, x, 0, false)
		}
	}()
}

func (c *Cache) prefetch(ref Ref, x *Index, i int) {
	if c.has(ckey{ref.Key, i}) {
		return
	}
	select {
	case c.ahead <- struct{}{}:
	default:
		return // enough read-ahead in flight
	}
	go func() {
		defer func() { <-c.ahead }()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
		defer cancel()
		_, _ = c.block(ctx, ref, x, i, false)
	}()
}

// has reports whether k is cached or being loaded.
func (c *Cache) has(k ckey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.entries[k]
	if !ok {
		_, ok = c.mu.inflight[k]
	}
	return ok
}

// get returns k's value from the cache, or loads it: one load per key at
// a time, shared by every caller that asks meanwhile. The load runs on
// its own bounded context, so one caller giving up does not fail the
// others.
func (c *Cache) get(ctx context.Context, k ckey, load func(context.Context) (any, int64, error)) (any, error) {
	c.mu.Lock()
	if el, ok := c.mu.entries[k]; ok {
		c.mu.lru.MoveToFront(el)
		c.mu.Unlock()
		c.Hits.Add(1)
		return el.Value.(*centry).val, nil
	}
	cl, ok := c.mu.inflight[k]
	if !ok {
		cl = &call{done: make(chan struct{})}
		c.mu.inflight[k] = cl
		c.Misses.Add(1)
		go func() {
			lctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
			defer cancel()
			val, size, err := load(lctx)
			c.mu.Lock()
			delete(c.mu.inflight, k)
			if err == nil {
				c.insertLocked(k, val, size)
			}
			c.mu.Unlock()
			if err != nil {
				c.Errors.Add(1)
			}
			cl.val, cl.err = val, err
			close(cl.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-cl.done:
		return cl.val, cl.err
	case <-ctx.Done():
		return nil, fmt.Errorf("tier: read %s: %w", k.obj, ctx.Err())
	}
}

func (c *Cache) insertLocked(k ckey, val any, size int64) {
	c.mu.entries[k] = c.mu.lru.PushFront(&centry{k: k, val: val, size: size})
	c.mu.used += size
	for c.mu.used > c.opts.MaxBytes && c.mu.lru.Len() > 1 {
		el := c.mu.lru.Back()
		e := el.Value.(*centry)
		c.mu.lru.Remove(el)
		delete(c.mu.entries, e.k)
		c.mu.used -= e.size
	}
}

// Forget drops an object's blocks and index (its segment was deleted).
func (c *Cache) Forget(obj string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.mu.lru.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*centry); e.k.obj == obj {
			c.mu.lru.Remove(el)
			delete(c.mu.entries, e.k)
			c.mu.used -= e.size
		}
		el = next
	}
}

// fetch is one ranged read with retries until ctx ends: a store that is
// slow or failing delays a cold read, never returns it wrong.
func (c *Cache) fetch(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := c.lim.wait(ctx, n); err != nil {
		return nil, fmt.Errorf("tier: read %s: %w", key, err)
	}
	backoff := 20 * time.Millisecond
	for {
		c.Gets.Add(1)
		b, err := c.st.GetRange(ctx, key, off, n)
		if err == nil {
			c.GetBytes.Add(int64(len(b)))
			return b, nil
		}
		if errors.Is(err, ErrNotFound) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		backoff = min(backoff*2, time.Second)
	}
}

// limiter spaces reads so they average at most rate bytes a second.
type limiter struct {
	rate int64
	mu   sync.Mutex
	next time.Time
}

func (l *limiter) wait(ctx context.Context, n int64) error {
	if l.rate <= 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
