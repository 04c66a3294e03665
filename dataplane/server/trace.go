package server

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
)

// Protocol tracing (log level trace) prints what a client sends and is
// sent as nats-server does: `<<- [PUB foo 5]`, `<<- MSG_PAYLOAD: ["hello"]`,
// `->> [MSG foo 1 5]`, `->> [OK]`. Secrets never reach the log: CONNECT's
// password and token show as [REDACTED].

// maxTracedPayload bounds a traced payload; the rest is cut.
const maxTracedPayload = 1024

// secretFields are the CONNECT fields tracing redacts.
var secretFields = regexp.MustCompile(`"(pass|auth_token)"\s*:\s*"(?:[^"\\]|\\.)*"`)

// redactConnect hides the secrets of a CONNECT control line.
func redactConnect(line []byte) []byte {
	return secretFields.ReplaceAll(line, []byte(`"$1":"[REDACTED]"`))
}

// traceIn logs one operation a client sent: raw is its bytes as parsed.
func (c *client) traceIn(raw []byte) {
	line, payload, _ := bytes.Cut(raw, []byte("\r\n"))
	if len(line) >= 7 && bytes.EqualFold(line[:7], []byte("CONNECT")) {
		line = redactConnect(line)
	}
	log := c.logger()
	log.Log(context.Background(), LevelTrace, "<<- ["+string(line)+"]")
	if len(payload) >= 2 {
		payload = payload[:len(payload)-2] // its \r\n
		log.Log(context.Background(), LevelTrace, "<<- MSG_PAYLOAD: ["+tracedPayload(payload)+"]")
	}
}

// traceOut logs control lines queued for the client (+OK, PONG, -ERR,
// INFO, MSG lines without their payloads).
func (c *client) traceOut(b []byte) {
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\r\n"))
		b = rest
		if len(line) == 0 {
			continue
		}
		if line[0] == '+' {
			line = line[1:] // nats-server traces +OK as [OK]
		}
		c.logger().Log(context.Background(), LevelTrace, "->> ["+string(line)+"]")
	}
}

// traceMsg logs one message delivered to the client.
func (c *client) traceMsg(subj, sid, reply []byte, hdrLen, size int) {
	var b []byte
	if hdrLen >= 0 {
		b = append(b, "HMSG "...)
	} else {
		b = append(b, "MSG "...)
	}
	b = append(append(b, subj...), ' ')
	b = append(append(b, sid...), ' ')
	if len(reply) > 0 {
		b = append(append(b, reply...), ' ')
	}
	if hdrLen >= 0 {
		b = append(strconv.AppendInt(b, int64(hdrLen), 10), ' ')
	}
	b = strconv.AppendInt(b, int64(size), 10)
	c.logger().Log(context.Background(), LevelTrace, "->> ["+string(b)+"]")
}

func tracedPayload(p []byte) string {
	if len(p) > maxTracedPayload {
		return strconv.Quote(string(p[:maxTracedPayload])) + "..."
	}
	return strconv.Quote(string(p))
}
