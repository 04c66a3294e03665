package protocol

import "strconv"

// Fixed server operations.
var (
	Ping = []byte("PING\r\n")
	Pong = []byte("PONG\r\n")
	OK   = []byte("+OK\r\n")
)

// The -ERR texts nats-server sends; clients match on them.
const (
	ErrTextUnknownOp      = "Unknown Protocol Operation"
	ErrTextMaxPayload     = "Maximum Payload Violation"
	ErrTextControlLine    = "maximum control line exceeded" // nats-server sends its error text here
	ErrTextMaxConnections = "maximum connections exceeded"
	ErrTextStale          = "Stale Connection"
	ErrTextSlowConsumer   = "Slow Consumer"
	ErrTextInvalidSubject = "Invalid Subject"
	ErrTextInvalidPublish = "Invalid Publish Subject"
	ErrTextAuthViolation  = "Authorization Violation"
	ErrTextAuthTimeout    = "Authentication Timeout"
	ErrTextTLSRequired    = "Secure Connection - TLS Required"
)

// AppendErr appends `-ERR '<text>'`.
func AppendErr(dst []byte, text string) []byte {
	dst = append(dst, "-ERR '"...)
	dst = append(dst, text...)
	return append(dst, "'\r\n"...)
}

// AppendMsgLine appends the control line of a delivery: MSG when hdrLen
// is negative (no headers), else HMSG. The payload and its CRLF follow.
func AppendMsgLine(dst, subject, sid, reply []byte, hdrLen, size int) []byte {
	if hdrLen < 0 {
		dst = append(dst, "MSG "...)
	} else {
		dst = append(dst, "HMSG "...)
	}
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	dst = append(dst, ' ')
	if len(reply) > 0 {
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	if hdrLen >= 0 {
		dst = strconv.AppendInt(dst, int64(hdrLen), 10)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}
