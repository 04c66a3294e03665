package jetstream

import (
	"math"
	"time"
)

// The times an int64 of unix nanoseconds can hold: 1677-09-21 to
// 2262-04-11.
var (
	minUnixNanos = time.Unix(0, math.MinInt64)
	maxUnixNanos = time.Unix(0, math.MaxInt64)
)

// unixNanos is t in unix nanoseconds, as message stamps are kept, held to
// what an int64 can carry: a request's time past either end (a start_time
// in year 9999 or 0001) compares as later or earlier than every stored
// message instead of wrapping around to the other end, as t.UnixNano()
// does. Every time a request brings is compared with stamps through it.
func unixNanos(t time.Time) int64 {
	switch {
	case t.Before(minUnixNanos):
		return math.MinInt64
	case t.After(maxUnixNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}
