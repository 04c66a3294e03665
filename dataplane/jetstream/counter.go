package jetstream

import (
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// Counter streams (allow_msg_counter) keep one running total per subject:
// a publish carries "Nats-Incr: <integer>" and no body, and the apply path
// stores it with the body {"val":"<new total>"}, the total being the last
// message on the subject plus the increment. The integers are unbounded
// (math/big), as on nats-server, and the PubAck carries the total as
// "val". The total is read and written inside the apply, under the stream
// lock, so concurrent increments never lose one, and an R3 stream's
// replicas receive the stored body, not the increment: they agree without
// computing anything.
//
// A counter stream that sources other counter streams aggregates them: a
// sourced message carries its origin's total, not an increment, so the
// apply remembers per origin (the first field of Nats-Stream-Source) and
// origin subject the last total taken from it, in the stored message's
// Nats-Counter-Sources header, and adds the difference. Each origin's
// total then counts once however often it is redelivered or restarted,
// and the aggregate's own Nats-Incr is rewritten to that difference.

// maxIncrLen bounds a Nats-Incr value (sign and digits). nats-server
// takes any length, but a 1 MiB integer costs seconds to parse and to
// add to on the apply path, which a store's streams share: one tenant's
// increments would stall its neighbours' writes. Below it an increment
// costs microseconds; longer ones are refused as invalid (10171).
const maxIncrLen = 1024

// counterValue is the body of a counter message.
type counterValue struct {
	Value string `json:"val"`
}

// counterSources is the Nats-Counter-Sources header: per source stream,
// per subject, the last total taken from it.
type counterSources map[string]map[string]string

// checkIncr reads a publish's Nats-Incr header and refuses what
// nats-server refuses before anything else is checked: an increment that
// is not an integer (on any stream), an increment to a stream without
// counters, one with a body, and one with a header that cannot go with a
// running total (roll-ups and every Nats-Expected-* check). incr is nil
// when the header is absent.
func checkIncr(cfg *api.StreamConfig, hdr, data []byte) (incr *big.Int, err error) {
	if incr, err = parseIncr(hdr); incr == nil || err != nil {
		return incr, err
	}
	switch {
	case !cfg.AllowMsgCounter:
		return nil, api.NewCounterDisabledError()
	case len(data) > 0:
		return nil, api.NewCounterHasPayloadError()
	}
	for _, k := range []string{api.HeaderRollup, api.HeaderExpectedStream, api.HeaderExpectedLastMsgID,
		api.HeaderExpectedLastSubjSeqSubj, api.HeaderExpectedLastSeq, api.HeaderExpectedLastSubjSeq} {
		if len(headerValue(hdr, k)) > 0 {
			return nil, api.NewCounterIncrementInvalidError()
		}
	}
	return incr, nil
}

// parseIncr reads a Nats-Incr value, nil if there is none. It is all a
// message sourced into a counter stream is checked for: its origin ran
// the rest, and one without a value is refused as missing by the caller,
// as nats-server refuses it.
func parseIncr(hdr []byte) (*big.Int, error) {
	v := headerValue(hdr, api.HeaderIncr)
	if len(v) == 0 {
		return nil, nil
	}
	if len(v) > maxIncrLen {
		return nil, api.NewCounterIncrementInvalidError()
	}
	incr, ok := new(big.Int).SetString(string(v), 10)
	if !ok {
		return nil, api.NewCounterIncrementInvalidError()
	}
	return incr, nil
}

// applyIncrLocked turns an increment on subj into the message to store:
// the new total as the body, and the last total's Nats-Counter-Sources
// carried over into hdr. A sourced message (hdr has Nats-Stream-Source)
// brings its origin's total in data; its increment is the difference from
// the origin's total last taken. A last message that is no counter (a body
// that is not {"val":"…"}, or a sources header that is not JSON) makes the
// counter broken, as on nats-server.
func (s *stream) applyIncrLocked(subj string, hdr, data []byte, incr *big.Int, ap *applier) (newHdr, body []byte, val string, err error) {
	var total big.Int
	var sources counterSources
	last, err := s.lastOnSubjectLocked(subj, ap)
	if err != nil {
		return nil, nil, "", err
	}
	if last != nil {
		var cv counterValue
		if json.Unmarshal(last.Data, &cv) != nil {
			return nil, nil, "", api.NewCounterBrokenError()
		}
		if src := headerValue(last.Header, api.HeaderCounterSources); len(src) > 0 {
			if json.Unmarshal(src, &sources) != nil {
				return nil, nil, "", api.NewCounterBrokenError()
			}
		}
		// A value that is no integer is read as far as it goes, exactly
		// as nats-server's (the same math/big) reading leaves it.
		total.SetString(cv.Value, 10)
	}
	if src := headerValue(hdr, api.HeaderStreamSource); len(src) > 0 {
		if incr, err = sources.take(string(src), subj, data); err != nil {
			return nil, nil, "", err
		}
		hdr = setHeader(hdr, api.HeaderIncr, incr.String())
	}
	if len(sources) > 0 {
		b, _ := json.Marshal(sources)
		hdr = setHeader(hdr, api.HeaderCounterSources, string(b))
	}
	total.Add(&total, incr)
	val = total.String()
	body = make([]byte, 0, len(val)+10)
	body = append(body, `{"val":`...)
	body = strconv.AppendQuote(body, val)
	body = append(body, '}')
	if mx := s.mu.cfg.MaxMsgSize; mx > 0 && len(hdr)+len(body) > int(mx) {
		return nil, nil, "", api.NewMessageTooLargeError()
	}
	return hdr, body, val, nil
}

// take records a sourced total and returns what it adds: the origin's
// total (the body {"val":"…"}) less the one last taken from the same
// origin and origin subject. streamSource is the message's
// Nats-Stream-Source, "<origin> <seq> <filter> <dest> <subject> …"; subj,
// the subject here, stands in for an origin subject it does not name.
// *cs is made when it is the first total taken.
func (cs *counterSources) take(streamSource, subj string, data []byte) (*big.Int, error) {
	fields := strings.Split(streamSource, " ")
	origin, osubj := fields[0], subj
	if len(fields) >= 5 {
		osubj = fields[4]
	}
	var cv counterValue
	if json.Unmarshal(data, &cv) != nil || len(cv.Value) > 2*maxIncrLen {
		return nil, api.NewCounterBrokenError()
	}
	sourced, ok := new(big.Int).SetString(cv.Value, 10)
	if !ok {
		return nil, api.NewCounterBrokenError()
	}
	if *cs == nil {
		*cs = counterSources{}
	}
	if (*cs)[origin] == nil {
		(*cs)[origin] = map[string]string{}
	}
	var prev big.Int
	prev.SetString((*cs)[origin][osubj], 10)
	(*cs)[origin][osubj] = sourced.String()
	return new(big.Int).Sub(sourced, &prev), nil
}

// lastOnSubjectLocked reads the newest message on the literal subject
// subj, seeing the writes of the current group; nil if there is none.
// Counter streams are never tiered, so the message's body is here.
func (s *stream) lastOnSubjectLocked(subj string, ap *applier) (*store.Message, error) {
	if s.mu.state.Msgs == 0 {
		return nil, nil
	}
	if err := ap.visible(); err != nil {
		return nil, err
	}
	m, err := ap.rd.LastMsg(s.id, subj)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, api.NewStreamStoreFailedError(err)
	}
	return &m, nil
}

// appendCounterVal adds a counter's total to a PubAck appendPubAck wrote:
// {"stream":…,"seq":…,"val":"…"}.
func appendCounterVal(ack []byte, val string) []byte {
	ack = append(ack[:len(ack)-1], `,"val":`...)
	ack = strconv.AppendQuote(ack, val)
	return append(ack, '}')
}
