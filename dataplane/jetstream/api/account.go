package api

// AccountInfo is the body of the $JS.API.INFO reply: the account's usage
// and limits. Its top level is a Tier holding the totals, which is why the
// tier's members appear flat next to domain, api and tiers.
type AccountInfo struct {
	Tier
	Domain string          `json:"domain,omitempty"`
	API    APIStats        `json:"api"`
	Tiers  map[string]Tier `json:"tiers,omitempty"`
}

// Tier is usage and limits for one replication tier ("R1", "R3"), or the
// account totals when it is AccountInfo's top level.
type Tier struct {
	Memory         uint64        `json:"memory"`
	Store          uint64        `json:"storage"`
	ReservedMemory uint64        `json:"reserved_memory"`
	ReservedStore  uint64        `json:"reserved_storage"`
	Streams        int           `json:"streams"`
	Consumers      int           `json:"consumers"`
	Limits         AccountLimits `json:"limits"`
}

// AccountLimits are the JetStream limits from the account JWT (per tier
// when tiered). -1 means unlimited. jsm.go's schema forbids unknown members
// here.
type AccountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStore             int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StoreMaxStreamBytes  int64 `json:"storage_max_stream_bytes"`
	// MaxBytesRequired forces every stream to set max_bytes.
	MaxBytesRequired bool `json:"max_bytes_required"`
}

// maxStreamBytes returns whether max_bytes is required for a stream of
// storage st and the largest max_bytes it may set (0: no ceiling).
func (l *AccountLimits) maxStreamBytes(st StorageType) (required bool, ceiling int64) {
	if l == nil {
		return false, 0
	}
	ceiling = l.StoreMaxStreamBytes
	if st == MemoryStorage {
		ceiling = l.MemoryMaxStreamBytes
	}
	return l.MaxBytesRequired, ceiling
}

// APIStats counts the account's API traffic and states the API level the
// server implements, which clients use to gate newer features (ADR-44).
type APIStats struct {
	Level    int    `json:"level"`
	Total    uint64 `json:"total"`
	Errors   uint64 `json:"errors"`
	Inflight uint64 `json:"inflight,omitempty"`
}
