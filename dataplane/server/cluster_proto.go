package server

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/contrail/contrail/dataplane/protocol"
)

// The route protocol between nodes, modelled on nats-server's:
//
//	INFO {json}                 who a node is (first line both ways)
//	CONNECT {json}              the dialer's greeting
//	PING / PONG / +OK / -ERR 'text'
//	RS+ <acct> <subj>[ <queue> <weight>]   interest gained
//	RS- <acct> <subj>[ <queue>]            interest lost
//	RMSG <acct> <subj> [+ <reply> <queue>... | '|' <queue>... | <reply>] <size>
//	HMSG <acct> <subj> [...] <hdr size> <size>
//	RDMSG / HDMSG <acct> <to> <subj> [...] ...   routed by to, shown as subj
//	PAUSE <acct> / RESUME <acct>           stop / go on reading the account's
//	                                       publishers (sent only to a peer
//	                                       whose INFO says "pace")
//
// A message frame names the queue groups it is for: the receiver delivers
// it to its plain subscribers and to one member of each named group. A
// message for more groups than one frame holds (frameQueues) goes as
// several; the later ones double the marker ("++" or "||"): queue groups
// only, the plain subscribers had the first. The
// cluster port is reachable by anyone who can reach the node, so parsing
// is bounded like the client port's.

// routeOpKind names a route protocol operation.
type routeOpKind uint8

const (
	routeOpInfo routeOpKind = iota + 1
	routeOpConnect
	routeOpPing
	routeOpPong
	routeOpOK
	routeOpErr
	routeOpSub   // RS+
	routeOpUnsub // RS-
	routeOpMsg   // RMSG, HMSG, RDMSG, HDMSG
	routeOpPause
	routeOpResume
)

// maxRouteQueues bounds the queue names one message frame may carry.
const maxRouteQueues = 1024

var (
	errRouteControlLine = errors.New("route: control line too long")
	errRouteMaxPayload  = errors.New("route: payload too large")
	errRouteProtocol    = errors.New("route: protocol error")
)

// routeLimits bound what a peer may send in one operation.
type routeLimits struct {
	maxControlLine int
	maxPayload     int
}

// routeOp is one parsed operation. Its slices alias the parse buffer and
// are valid until the buffer is reused.
type routeOp struct {
	kind   routeOpKind
	arg    []byte // INFO/CONNECT JSON, -ERR text
	acct   []byte
	subj   []byte // the subject the receiver presents
	to     []byte // the subject the receiver routes by (subj unless D form)
	queue  []byte // RS+/RS-
	weight int    // RS+ of a queue group: how many members the peer has
	reply  []byte
	queues [][]byte
	// queuesOnly: the frame repeats a message for more of the queue
	// groups (a "++" or "||" frame); plain subscribers had it from the
	// first.
	queuesOnly bool
	hdrLen     int // -1: no headers
	msg        []byte
}

// parseRoute parses one operation from the start of buf. It returns the
// bytes used, 0 when buf holds no complete operation yet.
func parseRoute(buf []byte, lim routeLimits, op *routeOp) (int, error) {
	nl := bytes.IndexByte(buf, '\n')
	if nl < 0 {
		if len(buf) > lim.maxControlLine {
			return 0, errRouteControlLine
		}
		return 0, nil
	}
	if nl > lim.maxControlLine {
		return 0, errRouteControlLine
	}
	line := buf[:nl]
	line = bytes.TrimSuffix(line, []byte{'\r'})
	verb, rest, _ := bytes.Cut(line, []byte{' '})
	*op = routeOp{queues: op.queues[:0], hdrLen: -1}
	used := nl + 1
	var vb [maxVerb]byte
	verb = upperVerb(&vb, verb)
	switch string(verb) {
	case "INFO":
		op.kind, op.arg = routeOpInfo, bytes.TrimSpace(rest)
	case "CONNECT":
		op.kind, op.arg = routeOpConnect, bytes.TrimSpace(rest)
	case "PING":
		op.kind = routeOpPing
	case "PONG":
		op.kind = routeOpPong
	case "+OK":
		op.kind = routeOpOK
	case "-ERR":
		op.kind, op.arg = routeOpErr, bytes.TrimSpace(rest)
	case "RS+":
		var f [4][]byte
		n := protocol.Fields(rest, f[:])
		if n != 2 && n != 4 {
			return 0, fmt.Errorf("%w: RS+ wants 2 or 4 arguments", errRouteProtocol)
		}
		op.kind, op.acct, op.subj = routeOpSub, f[0], f[1]
		if n == 4 {
			op.queue = f[2]
			w, err := strconv.ParseUint(string(f[3]), 10, 31)
			if err != nil || w == 0 {
				return 0, fmt.Errorf("%w: RS+ weight %q", errRouteProtocol, f[3])
			}
			op.weight = int(w)
		}
	case "RS-":
		var f [3][]byte
		n := protocol.Fields(rest, f[:])
		if n != 2 && n != 3 {
			return 0, fmt.Errorf("%w: RS- wants 2 or 3 arguments", errRouteProtocol)
		}
		op.kind, op.acct, op.subj = routeOpUnsub, f[0], f[1]
		if n == 3 {
			op.queue = f[2]
		}
	case "PAUSE", "RESUME":
		var f [1][]byte
		if protocol.Fields(rest, f[:]) != 1 {
			return 0, fmt.Errorf("%w: %s wants 1 argument", errRouteProtocol, string(verb))
		}
		op.kind, op.acct = routeOpPause, f[0]
		if verb[0] == 'R' {
			op.kind = routeOpResume
		}
	case "RMSG", "HMSG", "RDMSG", "HDMSG":
		var room [12][]byte
		n, err := parseRouteMsg(verb, msgFields(&room, rest), lim, op)
		if err != nil {
			return 0, err
		}
		if len(buf)-used < n+2 {
			return 0, nil
		}
		if buf[used+n] != '\r' || buf[used+n+1] != '\n' {
			return 0, fmt.Errorf("%w: message not followed by CRLF", errRouteProtocol)
		}
		op.msg = buf[used : used+n]
		used += n + 2
	default:
		return 0, fmt.Errorf("%w: unknown operation %q", errRouteProtocol, string(verb))
	}
	return used, nil
}

// parseRouteMsg reads a message frame's arguments (f, the line split by
// fields; verb upper-cased) and returns the size of the body that follows.
func parseRouteMsg(verb []byte, f [][]byte, lim routeLimits, op *routeOp) (int, error) {
	op.kind = routeOpMsg
	min := 3
	hdr := verb[0] == 'H'
	dform := string(verb) == "RDMSG" || string(verb) == "HDMSG"
	if hdr {
		min++
	}
	if dform {
		min++
	}
	if len(f) < min || len(f) > maxRouteQueues+8 {
		return 0, fmt.Errorf("%w: %s: %d arguments", errRouteProtocol, string(verb), len(f))
	}
	op.acct, f = f[0], f[1:]
	if dform {
		op.to, f = f[0], f[1:]
	}
	op.subj, f = f[0], f[1:]
	if !dform {
		op.to = op.subj
	}
	sizes := 1
	if hdr {
		sizes = 2
	}
	mid, nums := f[:len(f)-sizes], f[len(f)-sizes:]
	switch {
	case len(mid) == 0:
	case len(mid) == 1:
		op.reply = mid[0]
	case (string(mid[0]) == "+" || string(mid[0]) == "++") && len(mid) >= 3:
		op.reply = mid[1]
		op.queues = append(op.queues, mid[2:]...)
		op.queuesOnly = len(mid[0]) == 2
	case (string(mid[0]) == "|" || string(mid[0]) == "||") && len(mid) >= 2:
		op.queues = append(op.queues, mid[1:]...)
		op.queuesOnly = len(mid[0]) == 2
	default:
		return 0, fmt.Errorf("%w: %s: bad reply/queue arguments", errRouteProtocol, string(verb))
	}
	if len(op.queues) > maxRouteQueues {
		return 0, fmt.Errorf("%w: %s: %d queue groups, at most %d", errRouteProtocol, string(verb), len(op.queues), maxRouteQueues)
	}
	size, err := strconv.Atoi(string(nums[len(nums)-1]))
	if err != nil || size < 0 {
		return 0, fmt.Errorf("%w: %s: bad size %q", errRouteProtocol, string(verb), nums[len(nums)-1])
	}
	if size > lim.maxPayload {
		return 0, errRouteMaxPayload
	}
	if hdr {
		h, err := strconv.Atoi(string(nums[0]))
		if err != nil || h < 0 || h > size {
			return 0, fmt.Errorf("%w: %s: bad header size %q", errRouteProtocol, string(verb), nums[0])
		}
		op.hdrLen = h
	}
	return size, nil
}

// msgFields splits a message frame's arguments: into room, on the stack,
// for every frame but one naming many queue groups, so a routed message
// is parsed without allocating; past the frame's bound (maxRouteQueues+8)
// the result is one longer than the bound, for parseRouteMsg to refuse.
func msgFields(room *[12][]byte, args []byte) [][]byte {
	if n := protocol.Fields(args, room[:]); n <= len(room) {
		return room[:n]
	}
	big := make([][]byte, maxRouteQueues+9)
	return big[:min(protocol.Fields(args, big), len(big))]
}

// maxVerb is the longest operation name the route protocol has
// ("CONNECT").
const maxVerb = 8

// upperVerb returns verb in upper case, in buf's room when it fits: the
// protocol's operation names are case-insensitive, and upper-casing into
// a new slice cost every routed message an allocation. A longer verb is
// no operation and is returned as it is.
func upperVerb(buf *[maxVerb]byte, verb []byte) []byte {
	if len(verb) > len(buf) {
		return verb
	}
	for i, c := range verb {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
	}
	return buf[:len(verb)]
}

// appendRS appends an RS+ (add) or RS- line; weight is a queue group's
// member count (RS+ only).
func appendRS(b []byte, add bool, acct, subj, queue string, weight int) []byte {
	if add {
		b = append(b, "RS+ "...)
	} else {
		b = append(b, "RS- "...)
	}
	b = append(b, acct...)
	b = append(b, ' ')
	b = append(b, subj...)
	if queue != "" {
		b = append(b, ' ')
		b = append(b, queue...)
		if add {
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(max(weight, 1)), 10)
		}
	}
	return append(b, "\r\n"...)
}

// appendPause appends a PAUSE (on) or RESUME line for acct.
func appendPause(b []byte, on bool, acct string) []byte {
	if on {
		b = append(b, "PAUSE "...)
	} else {
		b = append(b, "RESUME "...)
	}
	b = append(b, acct...)
	return append(b, "\r\n"...)
}

// maxFrameQueueBytes bounds the queue names (with their separators) one
// message frame carries: far inside the receiver's control line bound
// (the client's plus 64 KiB), whatever the subject and reply (each within
// the client's).
const maxFrameQueueBytes = 32 << 10

// frameQueues is how many of queues (at least one) the next frame of a
// message carries: at most maxRouteQueues, and at most
// maxFrameQueueBytes of names. A message for more queue groups than fit
// goes as several frames, the later ones marked queues-only.
func frameQueues(queues [][]byte) int {
	n, size := 0, 0
	for n < len(queues) && n < maxRouteQueues {
		size += len(queues[n]) + 1
		if n > 0 && size > maxFrameQueueBytes {
			break
		}
		n++
	}
	return n
}

// appendRouteMsgLine appends a message frame's control line. to is nil
// when the message is routed by subj itself. queuesOnly marks a frame
// that repeats a message for more queue groups (see frameQueues); it
// needs queues.
func appendRouteMsgLine(b []byte, acct string, to, subj, reply []byte, queues [][]byte, queuesOnly bool, hdrLen, size int) []byte {
	switch {
	case to != nil && hdrLen >= 0:
		b = append(b, "HDMSG "...)
	case to != nil:
		b = append(b, "RDMSG "...)
	case hdrLen >= 0:
		b = append(b, "HMSG "...)
	default:
		b = append(b, "RMSG "...)
	}
	b = append(b, acct...)
	b = append(b, ' ')
	if to != nil {
		b = append(b, to...)
		b = append(b, ' ')
	}
	b = append(b, subj...)
	b = append(b, ' ')
	switch {
	case len(queues) > 0 && len(reply) > 0:
		b = append(b, '+')
		if queuesOnly {
			b = append(b, '+')
		}
		b = append(b, ' ')
		b = append(b, reply...)
		b = append(b, ' ')
	case len(queues) > 0:
		b = append(b, '|')
		if queuesOnly {
			b = append(b, '|')
		}
		b = append(b, ' ')
	case len(reply) > 0:
		b = append(b, reply...)
		b = append(b, ' ')
	}
	for _, q := range queues {
		b = append(b, q...)
		b = append(b, ' ')
	}
	if hdrLen >= 0 {
		b = strconv.AppendInt(b, int64(hdrLen), 10)
		b = append(b, ' ')
	}
	b = strconv.AppendInt(b, int64(size), 10)
	return append(b, "\r\n"...)
}
