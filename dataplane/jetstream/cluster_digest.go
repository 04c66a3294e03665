package jetstream

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// ErrNoStream is StreamDigest's answer for a stream this node knows
// nothing of.
var ErrNoStream = errors.New("jetstream: no such stream")

// StreamDigest is what one node's store holds of one stream, reduced to
// figures that are equal on two nodes exactly when they hold the same
// records: replicas of a partition commit byte-identical batches, so once
// they have applied the same entries their digests match; a divergent
// replica (a lost entry, a hole, a stray record) does not.
type StreamDigest struct {
	// ID is the stream's store id on this node.
	ID uint64 `json:"id"`
	// Msgs, FirstSeq and LastSeq are the stored state summary's.
	Msgs     uint64 `json:"messages"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	// Records is how many records were hashed.
	Records int `json:"records"`
	// Hash covers every record of the stream but its metadata: the state
	// summary, messages, subject index, expiry and dedup entries and
	// consumers, in key order, keys taken without the stream id.
	Hash string `json:"hash"`
	// ConfigHash covers the metadata record (name and configuration),
	// kept apart so that copies of a stream that differ only in their
	// replica count compare equal on Hash.
	ConfigHash string `json:"config_hash"`
	// Applied is the stream's raft group's applied index on this node
	// (0 for an unreplicated stream): two replicas at the same index
	// must have equal digests.
	Applied uint64 `json:"applied"`
}

// StreamDigest hashes what this node's store holds of account's stream
// name, in key order from one consistent read. In a cluster the stream is
// found through the meta catalog, so every member answers whether or not
// it leads the stream's partition; a single node finds it among its
// streams. Every record's checksum is verified on the way: a corrupt
// record is an error (store.ErrCorrupt), never a digest.
func (e *Engine) StreamDigest(account, name string) (StreamDigest, error) {
	st, id, err := e.digestTarget(account, name)
	if err != nil {
		return StreamDigest{}, err
	}
	d := StreamDigest{ID: id}
	if g := groupOf(id); g != 0 {
		if d.Applied, _, err = st.Applied(g); err != nil {
			return StreamDigest{}, fmt.Errorf("jetstream: digest of %s: %w", name, err)
		}
	}
	h := newRecordHasher()
	if err := st.StreamRecords(id, h.add); err != nil {
		return StreamDigest{}, fmt.Errorf("jetstream: digest of %s: %w", name, err)
	}
	d.Records = h.records
	if info, err := st.LoadStream(id); err == nil {
		d.Msgs, d.FirstSeq, d.LastSeq = info.State.Msgs, info.State.FirstSeq, info.State.LastSeq
	} else if !errors.Is(err, store.ErrNotFound) {
		return StreamDigest{}, fmt.Errorf("jetstream: digest of %s: %w", name, err)
	}
	d.Hash, d.ConfigHash = h.sums()
	return d, nil
}

// recordHasher reduces one stream's records, as the store lists them, to
// StreamDigest's two hashes: each key and payload is hashed with its
// length first, so no two sequences of records hash alike by shifting
// bytes between them.
type recordHasher struct {
	data, conf hash.Hash
	records    int
	n          [binary.MaxVarintLen64]byte
}

func newRecordHasher() *recordHasher {
	return &recordHasher{data: sha256.New(), conf: sha256.New()}
}

// add takes the next record; its signature is the store's record callback.
func (h *recordHasher) add(key, payload []byte, meta bool) error {
	w := h.conf
	if !meta {
		w = h.data
		h.records++
	}
	for _, b := range [][]byte{key, payload} {
		w.Write(h.n[:binary.PutUvarint(h.n[:], uint64(len(b)))])
		w.Write(b)
	}
	return nil
}

// sums is the data and metadata hashes, in hex.
func (h *recordHasher) sums() (data, conf string) {
	return hex.EncodeToString(h.data.Sum(nil)), hex.EncodeToString(h.conf.Sum(nil))
}

// digestTarget finds the store and id of account's stream name.
func (e *Engine) digestTarget(account, name string) (*store.Store, uint64, error) {
	if e.cl != nil {
		if asg := e.cl.catalog.lookup(account, name); asg != nil {
			st := e.opts.Store
			if asg.Config != nil && asg.Config.Storage == api.MemoryStorage {
				st = e.opts.Memory
			}
			return st, asg.ID, nil
		}
	}
	if a := e.account(account); a != nil {
		if s := a.lookup(name); s != nil {
			return s.ap.st, s.id, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: %s in account %s", ErrNoStream, name, account)
}
