package jetstream

import (
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/jetstream/api"
)

// Status replies of DIRECT.GET: header-only messages, as clients expect.
var (
	directNotFound   = []byte("NATS/1.0 404 Message Not Found\r\n\r\n")
	directBadRequest = []byte("NATS/1.0 400 Bad Request\r\n\r\n")
	directNoStream   = []byte("NATS/1.0 503\r\n\r\n")
)

// directGet answers $JS.API.DIRECT.GET.<stream> (JSON body) and
// $JS.API.DIRECT.GET.<stream>.<subject> (last message on subject) with the
// message itself, its stream coordinates in headers (ADR-31).
func (a *jsAccount) directGet(req apiRequest, rest string) {
	if req.reply == "" {
		return
	}
	name, subj, _ := strings.Cut(rest, ".")
	s := a.lookup(name)
	if s == nil || !s.config().AllowDirect {
		// No responder for this stream, as a stream without allow_direct has
		// none on nats-server.
		a.acc.Publish(req.reply, "", directNoStream, nil)
		return
	}
	var greq api.MsgGetRequest
	if subj != "" {
		if len(req.body) > 0 {
			a.acc.Publish(req.reply, "", directBadRequest, nil)
			return
		}
		greq.LastFor = subj
	} else if err := decode(req.body, &greq); err != nil || greq.Batch > 0 || len(greq.MultiLastFor) > 0 {
		a.acc.Publish(req.reply, "", directBadRequest, nil)
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
	hdr := m.Header
	if len(hdr) == 0 {
		hdr = []byte("NATS/1.0\r\n\r\n")
	}
	out := make([]byte, 0, len(hdr)+128+len(m.Subject))
	out = append(out, hdr[:len(hdr)-2]...) // drop the block's final CRLF
	out = appendHdr(out, api.HeaderStream, name)
	out = appendHdr(out, api.HeaderSubject, m.Subject)
	out = appendHdr(out, api.HeaderSequence, strconv.FormatUint(m.Seq, 10))
	out = appendHdr(out, api.HeaderTimeStamp, time.Unix(0, m.Time).UTC().Format(time.RFC3339Nano))
	out = append(out, "\r\n"...)
	a.acc.Publish(req.reply, "", out, m.Data)
}

func appendHdr(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}
