package jetstream

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
	"github.com/contrail/contrail/dataplane/store"
)

// Status replies of DIRECT.GET: header-only messages, as clients expect,
// with nats-server's codes and descriptions.
var (
	directNotFound     = []byte("NATS/1.0 404 Message Not Found\r\n\r\n")
	directEmptyRequest = []byte("NATS/1.0 408 Empty Request\r\n\r\n")
	directMalformed    = []byte("NATS/1.0 408 Malformed Request\r\n\r\n")
	directBadRequest   = []byte("NATS/1.0 408 Bad Request\r\n\r\n")
	directNoStream     = []byte("NATS/1.0 503\r\n\r\n")
)

// directGet answers $JS.API.DIRECT.GET.<stream> (JSON body) and
// $JS.API.DIRECT.GET.<stream>.<subject> (last message on subject) with the
// message itself, its stream coordinates in headers (ADR-31).
func (a *jsAccount) directGet(req apiRequest, rest string) {
	defer a.guard(req)
	if req.reply == "" {
		return
	}
	name, subj, bySubject := strings.Cut(rest, ".")
	s := a.lookup(name)
	ok := s != nil && s.config().AllowDirect
	if s == nil {
		// A mirror with mirror_direct answers for its origin, here when
		// the origin is not (on a cluster clusterAdmit chose this node
		// for it, or the origin's node answers).
		if m := a.directMirror(name); m != nil {
			s, name, ok = m, m.name(), true
		}
	}
	if !ok {
		// No responder for this stream, as a stream without allow_direct has
		// none on nats-server.
		a.acc.Publish(req.reply, "", directNoStream, nil)
		return
	}
	greq, status := directRequest(req.body, subj, bySubject)
	if status != nil {
		a.acc.Publish(req.reply, "", status, nil)
		return
	}
	if len(greq.MultiLastFor) > 0 {
		s.directMultiLast(a, &greq, req.reply)
		return
	}
	if greq.Batch != 0 {
		s.directBatch(a, &greq, req.reply)
		return
	}
	m, aerr := s.get(&greq)
	if aerr != nil {
		if aerr.ErrCode == api.CodeNoMessageFound {
			a.acc.Publish(req.reply, "", directNotFound, nil)
		} else {
			a.acc.Publish(req.reply, "", directBadRequest, nil)
		}
		return
	}
	if greq.NoHeaders {
		a.acc.Publish(req.reply, "", nil, m.Data)
		return
	}
	a.acc.Publish(req.reply, "", directHeader(&m, name), m.Data)
}

// directHeader is the header block of a direct get's reply: the stored
// message's own headers, then its stream coordinates, then the pairs in
// extra (a batch's pending count and previous sequence).
func directHeader(m *store.Message, stream string, extra ...string) []byte {
	hdr := m.Header
	if len(hdr) == 0 {
		hdr = []byte("NATS/1.0\r\n\r\n")
	}
	out := make([]byte, 0, len(hdr)+160+len(m.Subject))
	out = append(out, hdr[:len(hdr)-2]...) // drop the block's final CRLF
	out = appendHdr(out, api.HeaderStream, stream)
	out = appendHdr(out, api.HeaderSubject, m.Subject)
	out = appendHdr(out, api.HeaderSequence, strconv.FormatUint(m.Seq, 10))
	out = appendHdr(out, api.HeaderTimeStamp, time.Unix(0, m.Time).UTC().Format(time.RFC3339Nano))
	for i := 0; i+1 < len(extra); i += 2 {
		out = appendHdr(out, extra[i], extra[i+1])
	}
	return append(out, "\r\n"...)
}

// directRequest reads a direct get: the JSON body, or for the subject form
// the subject (with an optional body that may set nothing but no_hdr). It
// returns the status reply nats-server gives a request it refuses.
func directRequest(body []byte, subj string, bySubject bool) (api.MsgGetRequest, []byte) {
	var req api.MsgGetRequest
	if len(body) > api.MaxRequestSize {
		// Refused unread, as every API request over the bound is.
		return req, directBadRequest
	}
	if bySubject {
		if len(body) > 0 && json.Unmarshal(body, &req) != nil {
			return req, directMalformed
		}
		if subj == "" || req.LastFor != "" || req.NextFor != "" || len(req.MultiLastFor) > 0 || req.Seq != 0 ||
			req.Batch != 0 || req.StartTime != nil || req.UpToSeq != 0 || req.UpToTime != nil {
			return req, directBadRequest
		}
		req.LastFor = subj
		return req, nil
	}
	if len(body) == 0 {
		return req, directEmptyRequest
	}
	if json.Unmarshal(body, &req) != nil {
		return req, directMalformed
	}
	if req.Seq == 0 && req.LastFor == "" && req.NextFor == "" && len(req.MultiLastFor) == 0 && req.StartTime == nil {
		return req, directEmptyRequest
	}
	// nats-server's conflicts: a last-by-subject get is never batched nor
	// combined with multi_last, nor is a next-by-subject one.
	switch {
	case req.Seq > 0 && req.LastFor != "",
		req.Seq > 0 && req.StartTime != nil,
		req.StartTime != nil && req.LastFor != "",
		req.LastFor != "" && req.NextFor != "",
		req.LastFor != "" && req.Batch > 0,
		req.LastFor != "" && len(req.MultiLastFor) > 0,
		req.NextFor != "" && len(req.MultiLastFor) > 0,
		req.UpToSeq > 0 && req.UpToTime != nil:
		return req, directBadRequest
	}
	return req, nil
}

func appendHdr(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}
