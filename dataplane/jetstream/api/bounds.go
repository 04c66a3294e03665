package api

import (
	"fmt"
	"math"
)

// Bounds on what one API request may ask for. nats-server has none of
// these beyond its max payload; each caps work a tenant could otherwise
// make a shared node do, and each is far above what clients send.
const (
	// MaxRequestSize caps a JSON API request body: nats-server's default
	// max_payload (1 MiB), so a request it would take is taken. A node
	// configured with a larger max_payload still refuses a larger request
	// before decoding it.
	MaxRequestSize = 1 << 20
	// MaxConsumerFilters caps a consumer's filter subjects. nats-server
	// has no cap (a 1 MiB request carries ~170,000 short filters, and it
	// compares every pair: ~20 s for 20,000). Matching messages costs per
	// token whatever the count (subject.Set), but creating the consumer,
	// counting its pending messages and every info reply still cost per
	// filter. KV watchers over many keys use thousands; 100,000 leaves them
	// room.
	MaxConsumerFilters = 100_000
	// MaxRequestSeq caps a sequence a request moves a stream to (a
	// purge's seq, a stream's first_seq): past it, the stream's next
	// sequences would run out and wrap to 0, which nats-server allows.
	MaxRequestSeq = math.MaxInt64
)

// ErrRequestTooLarge is why a request body over MaxRequestSize is
// refused without being decoded.
var ErrRequestTooLarge = fmt.Errorf("request exceeds the maximum of %d bytes", MaxRequestSize)

// errTooManyFilters is why a consumer with over MaxConsumerFilters
// filters is refused.
var errTooManyFilters = fmt.Errorf("consumer can not have more than %d filter subjects", MaxConsumerFilters)

// errFirstSeqTooLarge is why a first_seq over MaxRequestSeq is refused.
var errFirstSeqTooLarge = fmt.Errorf("stream first sequence can not exceed %d", uint64(MaxRequestSeq))
