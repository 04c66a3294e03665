package jetstream

import "bytes"

// headerValue returns the value of key in a NATS header block
// ("NATS/1.0[ status]\r\nKey: value\r\n…\r\n"), or nil. Keys match exactly,
// as nats-server matches them; nats.go writes the canonical spelling. The
// result aliases hdr.
func headerValue(hdr []byte, key string) []byte {
	if len(hdr) == 0 {
		return nil
	}
	// Skip the version line.
	i := bytes.Index(hdr, []byte("\r\n"))
	if i < 0 {
		return nil
	}
	rest := hdr[i+2:]
	for len(rest) > 0 {
		end := bytes.Index(rest, []byte("\r\n"))
		if end < 0 {
			end = len(rest)
		}
		line := rest[:end]
		if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
			return bytes.TrimSpace(line[len(key)+1:])
		}
		if end == len(rest) {
			break
		}
		rest = rest[end+2:]
	}
	return nil
}

// appendHeaderBlock builds a header block of key/value pairs.
func appendHeaderBlock(dst []byte, status string, kv ...string) []byte {
	dst = append(dst, "NATS/1.0"...)
	if status != "" {
		dst = append(dst, ' ')
		dst = append(dst, status...)
	}
	dst = append(dst, "\r\n"...)
	for i := 0; i+1 < len(kv); i += 2 {
		dst = append(dst, kv[i]...)
		dst = append(dst, ": "...)
		dst = append(dst, kv[i+1]...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// addHeader returns a copy of hdr (possibly empty) with key: value added.
func addHeader(hdr []byte, key, value string) []byte {
	out := make([]byte, 0, len(hdr)+len(key)+len(value)+16)
	if len(hdr) < 4 {
		out = append(out, "NATS/1.0\r\n"...)
	} else {
		out = append(out, hdr[:len(hdr)-2]...) // drop the block's final CRLF
	}
	out = append(out, key...)
	out = append(out, ": "...)
	out = append(out, value...)
	return append(out, "\r\n\r\n"...)
}

// setHeader returns hdr (possibly empty) with key's value replaced by
// value, or key: value added when hdr has no such key. hdr is not
// modified.
func setHeader(hdr []byte, key, value string) []byte {
	if len(hdr) >= 4 {
		i := bytes.Index(hdr, []byte("\r\n"))
		for i >= 0 && i+2 < len(hdr) {
			start := i + 2
			end := bytes.Index(hdr[start:], []byte("\r\n"))
			if end <= 0 {
				break
			}
			line := hdr[start : start+end]
			if len(line) > len(key) && line[len(key)] == ':' && string(line[:len(key)]) == key {
				out := make([]byte, 0, len(hdr)+len(value))
				out = append(out, hdr[:start+len(key)+1]...)
				out = append(out, ' ')
				out = append(out, value...)
				return append(out, hdr[start+end:]...)
			}
			i = start + end
		}
	}
	return addHeader(hdr, key, value)
}
