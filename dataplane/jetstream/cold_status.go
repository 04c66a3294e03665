package jetstream

// TierStatus is tiered storage's state, for /jsz and metrics.
type TierStatus struct {
	URL          string `json:"url"`
	SegmentBytes int64  `json:"segment_bytes"`
	// LocalBudget is the node's budget for local message bytes (0: none);
	// LocalBytes what the node's file streams hold locally now.
	LocalBudget int64  `json:"local_budget"`
	LocalBytes  uint64 `json:"local_bytes"`
	OverBudget  bool   `json:"over_budget"`
	// UploadBacklog is what tiering still has to move to get back to 80 %
	// of the budget.
	UploadBacklog uint64 `json:"upload_backlog_bytes"`
	ColdBytes     uint64 `json:"cold_bytes"`
	ColdMsgs      uint64 `json:"cold_messages"`
	Segments      int    `json:"segments"`
	CacheBytes    int64  `json:"cache_bytes"`
	CacheMax      int64  `json:"cache_max_bytes"`
	CacheHits     int64  `json:"cache_hits"`
	CacheMisses   int64  `json:"cache_misses"`
	Gets          int64  `json:"gets"`
	GetBytes      int64  `json:"get_bytes"`
	Uploads       int64  `json:"uploads"`
	UploadBytes   int64  `json:"upload_bytes"`
	UploadErrors  int64  `json:"upload_errors"`
	Rewrites      int64  `json:"rewrites"`
	Deletes       int64  `json:"deletes"`
	DeleteErrors  int64  `json:"delete_errors"`
	// Orphans counts objects the orphan scan removed: objects of this
	// node no record named.
	Orphans        int64              `json:"orphans_deleted"`
	ColdReads      int64              `json:"cold_reads"`
	ColdReadErrors int64              `json:"cold_read_errors"`
	LastError      string             `json:"last_error,omitempty"`
	Streams        []TierStreamStatus `json:"streams,omitempty"`
}

// TierStreamStatus is one stream's local and cold share.
type TierStreamStatus struct {
	Account    string `json:"account"`
	Stream     string `json:"stream"`
	LocalMsgs  uint64 `json:"local_messages"`
	LocalBytes uint64 `json:"local_bytes"`
	ColdMsgs   uint64 `json:"cold_messages"`
	ColdBytes  uint64 `json:"cold_bytes"`
	Segments   int    `json:"segments"`
	// FirstLocal is the first sequence held locally (the cold floor).
	FirstLocal uint64 `json:"first_local_seq"`
}

// TierStatus reports tiered storage, or nil when it is off.
func (e *Engine) TierStatus() *TierStatus {
	t := e.tiering
	if t == nil {
		return nil
	}
	ts := &TierStatus{URL: t.opts.URL, SegmentBytes: t.opts.SegmentBytes, LocalBudget: t.opts.LocalBytes,
		CacheBytes: t.cache.Used(), CacheMax: t.opts.CacheBytes,
		CacheHits: t.cache.Hits.Load(), CacheMisses: t.cache.Misses.Load(), Gets: t.cache.Gets.Load(), GetBytes: t.cache.GetBytes.Load(),
		Uploads: t.uploads.Load(), UploadBytes: t.uploadBytes.Load(), UploadErrors: t.uploadErrors.Load(), Rewrites: t.rewrites.Load(),
		Deletes: t.deletes.Load(), DeleteErrors: t.deleteErrors.Load(), Orphans: t.orphans.Load(),
		ColdReads: t.coldReads.Load(), ColdReadErrors: t.coldReadErrors.Load()}
	if ts.URL == "" {
		ts.URL = t.st.String()
	}
	list, _, accts, total := t.candidatesOf()
	ts.LocalBytes = total
	if b := uint64(t.opts.LocalBytes); b > 0 {
		ts.OverBudget = total > b
		if total > b*8/10 {
			ts.UploadBacklog = total - b*8/10
		}
	}
	for i, s := range list {
		s.mu.Lock()
		st, c := s.mu.state, &s.mu.cold
		ss := TierStreamStatus{Stream: s.mu.cfg.Name, ColdMsgs: c.msgs, ColdBytes: c.bytes, Segments: len(c.segs),
			LocalMsgs: st.Msgs - min(st.Msgs, c.msgs), LocalBytes: st.Bytes - min(st.Bytes, c.bytes),
			FirstLocal: max(s.coldFloorLocked(), st.FirstSeq)}
		s.mu.Unlock()
		ss.Account = accts[i]
		ts.ColdBytes += ss.ColdBytes
		ts.ColdMsgs += ss.ColdMsgs
		ts.Segments += ss.Segments
		ts.Streams = append(ts.Streams, ss)
	}
	t.mu.Lock()
	ts.LastError = t.mu.lastErr
	t.mu.Unlock()
	return ts
}
