package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DecodeRequest decodes an API request body into v the way nats-server
// does in its default strict mode: unknown members are an error, an empty
// body leaves v untouched, and several concatenated JSON values are
// decoded in turn. Syntax errors name the offset. Handlers answer any
// error with NewInvalidJSONError(err) (10025), so a misspelt or retired
// member (template_owner, say) is refused rather than silently dropped.
//
// A body over MaxRequestSize is refused with ErrRequestTooLarge before
// any of it is read.
func DecodeRequest(body []byte, v any) error {
	if len(body) > MaxRequestSize {
		return ErrRequestTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	for {
		err := dec.Decode(v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				err = fmt.Errorf("%w at offset %d", err, syntax.Offset)
			}
			return err
		}
	}
}

// IsEmptyRequest reports whether body asks nothing, as nats-server
// decides for the requests that take no body (STREAM.DELETE,
// CONSUMER.INFO, CONSUMER.DELETE), which answer anything else with 10038:
// no bytes, or a JSON object without members.
func IsEmptyRequest(body []byte) bool {
	if len(body) == 0 || string(body) == "{}" {
		return true
	}
	if len(body) > MaxRequestSize {
		return false
	}
	var v map[string]json.RawMessage
	return json.Unmarshal(body, &v) == nil && v != nil && len(v) == 0
}
