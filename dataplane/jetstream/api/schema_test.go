package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	jsm "github.com/nats-io/jsm.go/api"
	"github.com/nats-io/jsm.go/schemas"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// natscli (v0.5.0) decodes each reply into a jsm.go type and, if the reply
// is not an error, re-encodes that value and validates it against jsm.go's
// schema with santhosh-tekuri/jsonschema. A reply nats.go accepts can still
// fail there, so every reply shape is pushed through the same steps.

func loadSchema(schemaType string) ([]byte, error) {
	name, ok := strings.CutPrefix(schemaType, "io.nats.jetstream.api.v1.")
	if !ok {
		return nil, fmt.Errorf("not a JetStream API type: %s", schemaType)
	}
	return schemas.Load("jetstream/api/v1/" + name + ".json")
}

func validateAgainst(data any, schemaType string) ([]string, error) {
	src, err := loadSchema(schemaType)
	if err != nil {
		return nil, err
	}
	sch, err := jsonschema.CompileString("schema.json", string(src))
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if err := sch.Validate(doc); err != nil {
		verr, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return nil, err
		}
		var errs []string
		for _, e := range verr.BasicOutput().Errors {
			if e.KeywordLocation == "" || e.Error == "oneOf failed" || e.Error == "allOf failed" {
				continue
			}
			errs = append(errs, e.InstanceLocation+": "+e.Error)
		}
		if len(errs) == 0 {
			errs = []string{err.Error()}
		}
		return errs, nil
	}
	return nil, nil
}

// replyCase is one reply: our value, its type string, and the jsm.go
// type natscli decodes it into.
type replyCase struct {
	name   string
	typ    string
	ours   any
	decode func([]byte) (valid bool, errs []string, apiErr error)
}

// viaJSM decodes body into T and validates it as natscli would.
func viaJSM[T any, PT interface {
	*T
	ToError() error
	SchemaType() string
}](body []byte) (bool, []string, error) {
	var v T
	p := PT(&v)
	if err := json.Unmarshal(body, p); err != nil {
		return false, []string{"decode: " + err.Error()}, nil
	}
	if err := p.ToError(); err != nil {
		return true, nil, err
	}
	errs, err := validateAgainst(v, p.SchemaType())
	if err != nil {
		return false, []string{err.Error()}, nil
	}
	return len(errs) == 0, errs, nil
}

func successCases(t *testing.T) []replyCase {
	si, ci := sampleStreamInfo(t), sampleConsumerInfo(t, false)
	paged := Paged{Total: 2, Offset: 0, Limit: ListLimit}
	return []replyCase{
		{"stream create", TypeStreamCreateResponse,
			StreamCreateResponse{Response: Response{Type: TypeStreamCreateResponse}, StreamInfo: si, DidCreate: true},
			viaJSM[jsm.JSApiStreamCreateResponse]},
		{"stream create empty", TypeStreamCreateResponse,
			StreamCreateResponse{Response: Response{Type: TypeStreamCreateResponse}, StreamInfo: emptyStreamInfo(t)},
			viaJSM[jsm.JSApiStreamCreateResponse]},
		{"stream create mirror", TypeStreamCreateResponse,
			StreamCreateResponse{Response: Response{Type: TypeStreamCreateResponse}, StreamInfo: mirrorStreamInfo(t)},
			viaJSM[jsm.JSApiStreamCreateResponse]},
		{"stream update", TypeStreamUpdateResponse,
			StreamUpdateResponse{Response: Response{Type: TypeStreamUpdateResponse}, StreamInfo: si},
			viaJSM[jsm.JSApiStreamUpdateResponse]},
		{"stream info", TypeStreamInfoResponse,
			StreamInfoResponse{Response: Response{Type: TypeStreamInfoResponse}, Paged: Paged{Total: 2, Limit: 100_000}, StreamInfo: si},
			viaJSM[jsm.JSApiStreamInfoResponse]},
		{"stream list", TypeStreamListResponse,
			StreamListResponse{Response: Response{Type: TypeStreamListResponse}, Paged: paged,
				Streams: []*StreamInfo{si, emptyStreamInfo(t)}, Missing: []string{"X"}, Offline: map[string]string{"Y": "down"}},
			viaJSM[jsm.JSApiStreamListResponse]},
		{"stream list empty", TypeStreamListResponse,
			StreamListResponse{Response: Response{Type: TypeStreamListResponse}, Paged: Paged{Limit: ListLimit}, Streams: []*StreamInfo{}},
			viaJSM[jsm.JSApiStreamListResponse]},
		{"stream names", TypeStreamNamesResponse,
			StreamNamesResponse{Response: Response{Type: TypeStreamNamesResponse}, Paged: Paged{Total: 2, Limit: NamesLimit},
				Streams: []string{"A", "B"}},
			viaJSM[jsm.JSApiStreamNamesResponse]},
		{"stream names none", TypeStreamNamesResponse,
			StreamNamesResponse{Response: Response{Type: TypeStreamNamesResponse}, Paged: Paged{Limit: NamesLimit}},
			viaJSM[jsm.JSApiStreamNamesResponse]},
		{"stream delete", TypeStreamDeleteResponse,
			SuccessResponse{Response: Response{Type: TypeStreamDeleteResponse}, Success: true},
			viaJSM[jsm.JSApiStreamDeleteResponse]},
		{"stream purge", TypeStreamPurgeResponse,
			StreamPurgeResponse{Response: Response{Type: TypeStreamPurgeResponse}, Success: true, Purged: 7},
			viaJSM[jsm.JSApiStreamPurgeResponse]},
		{"msg get", TypeStreamMsgGetResponse,
			MsgGetResponse{Response: Response{Type: TypeStreamMsgGetResponse}, Message: &StoredMsg{Subject: "orders.1", Sequence: 5,
				Header: []byte("NATS/1.0\r\nA: b\r\n\r\n"), Data: []byte("hello"), Time: sampleTime}},
			viaJSM[jsm.JSApiMsgGetResponse]},
		{"msg get empty body", TypeStreamMsgGetResponse,
			MsgGetResponse{Response: Response{Type: TypeStreamMsgGetResponse}, Message: &StoredMsg{Subject: "x", Sequence: 1, Time: sampleTime}},
			viaJSM[jsm.JSApiMsgGetResponse]},
		{"msg delete", TypeStreamMsgDeleteResponse,
			SuccessResponse{Response: Response{Type: TypeStreamMsgDeleteResponse}, Success: true},
			viaJSM[jsm.JSApiMsgDeleteResponse]},
		{"consumer create", TypeConsumerCreateResponse,
			ConsumerInfoResponse{Response: Response{Type: TypeConsumerCreateResponse}, ConsumerInfo: ci},
			viaJSM[jsm.JSApiConsumerCreateResponse]},
		{"consumer create push durable", TypeConsumerCreateResponse,
			ConsumerInfoResponse{Response: Response{Type: TypeConsumerCreateResponse}, ConsumerInfo: sampleConsumerInfo(t, true)},
			viaJSM[jsm.JSApiConsumerCreateResponse]},
		{"consumer info", TypeConsumerInfoResponse,
			ConsumerInfoResponse{Response: Response{Type: TypeConsumerInfoResponse}, ConsumerInfo: ci},
			viaJSM[jsm.JSApiConsumerInfoResponse]},
		{"consumer list", TypeConsumerListResponse,
			ConsumerListResponse{Response: Response{Type: TypeConsumerListResponse}, Paged: paged,
				Consumers: []*ConsumerInfo{ci, sampleConsumerInfo(t, true)}},
			viaJSM[jsm.JSApiConsumerListResponse]},
		{"consumer names", TypeConsumerNamesResponse,
			ConsumerNamesResponse{Response: Response{Type: TypeConsumerNamesResponse}, Paged: paged, Consumers: []string{"a", "b"}},
			viaJSM[jsm.JSApiConsumerNamesResponse]},
		{"consumer delete", TypeConsumerDeleteResponse,
			SuccessResponse{Response: Response{Type: TypeConsumerDeleteResponse}, Success: true},
			viaJSM[jsm.JSApiConsumerDeleteResponse]},
		{"consumer pause", TypeConsumerPauseResponse,
			ConsumerPauseResponse{Response: Response{Type: TypeConsumerPauseResponse}, Paused: true, PauseUntil: sampleTime, PauseRemaining: time.Second},
			viaJSM[jsm.JSApiConsumerPauseResponse]},
		{"account info", TypeAccountInfoResponse,
			AccountInfoResponse{Response: Response{Type: TypeAccountInfoResponse}, AccountInfo: sampleAccountInfo()},
			viaJSM[jsm.JSApiAccountInfoResponse]},
		{"account info bare", TypeAccountInfoResponse,
			AccountInfoResponse{Response: Response{Type: TypeAccountInfoResponse}, AccountInfo: &AccountInfo{}},
			viaJSM[jsm.JSApiAccountInfoResponse]},
	}
}

// TestRepliesPassNatscliValidation checks each success reply twice: as we
// put it on the wire, and as natscli sees it after decoding into jsm.go's
// types and re-encoding.
func TestRepliesPassNatscliValidation(t *testing.T) {
	for _, c := range successCases(t) {
		t.Run(c.name, func(t *testing.T) {
			body, err := json.Marshal(c.ours)
			if err != nil {
				t.Fatal(err)
			}
			var wire any
			if err := json.Unmarshal(body, &wire); err != nil {
				t.Fatal(err)
			}
			errs, err := validateAgainst(wire, c.typ)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) > 0 {
				t.Errorf("wire form fails %s:\n%s\n%s", c.typ, strings.Join(errs, "\n"), body)
			}
			ok, errs, apiErr := c.decode(body)
			if apiErr != nil {
				t.Fatalf("jsm.go sees an error in a success reply: %v", apiErr)
			}
			if !ok {
				t.Errorf("natscli would reject:\n%s\n%s", strings.Join(errs, "\n"), body)
			}
		})
	}
}

// TestPubAckMatchesSchema: a PubAck has no type member; the schema allows
// only its own members.
func TestPubAckMatchesSchema(t *testing.T) {
	for _, ack := range []PubAckResponse{
		{PubAck: &PubAck{Stream: "S", Sequence: 2}},
		{PubAck: &PubAck{Stream: "S", Sequence: 2, Duplicate: true, Domain: "hub"}},
		{PubAck: &PubAck{Stream: "S", Sequence: 9, BatchID: "b1", BatchSize: 3, Value: "12"}},
	} {
		var doc any
		b, _ := json.Marshal(ack)
		_ = json.Unmarshal(b, &doc)
		errs, err := validateAgainst(doc, "io.nats.jetstream.api.v1.pub_ack_response")
		if err != nil || len(errs) > 0 {
			t.Errorf("%s: %v %v", b, err, errs)
		}
	}
}

// TestErrorRepliesMatchSchema: natscli does not validate error replies (it
// stops at the error), but the schemas describe them and other tools do.
// The error shapes below are nats-server's member for member. The listing
// replies keep their always-sent members ("streams":null, totals) on
// errors; for STREAM.NAMES that satisfies both of the schema's oneOf
// branches (its success branch requires "streams" but types only a
// "consumers" member), so nats-server's own error reply fails the schema
// too. That one is listed as expected.
func TestErrorRepliesMatchSchema(t *testing.T) {
	e := NewStreamNotFoundError()
	cases := []struct {
		typ          string
		reply        any
		schemaFlawed bool
	}{
		{TypeStreamCreateResponse, StreamCreateResponse{Response: Response{Type: TypeStreamCreateResponse, Error: e}}, false},
		{TypeStreamUpdateResponse, StreamUpdateResponse{Response: Response{Type: TypeStreamUpdateResponse, Error: e}}, false},
		{TypeStreamInfoResponse, StreamInfoResponse{Response: Response{Type: TypeStreamInfoResponse, Error: e}}, false},
		{TypeStreamDeleteResponse, SuccessResponse{Response: Response{Type: TypeStreamDeleteResponse, Error: e}}, false},
		{TypeStreamPurgeResponse, StreamPurgeResponse{Response: Response{Type: TypeStreamPurgeResponse, Error: e}}, false},
		{TypeStreamMsgGetResponse, MsgGetResponse{Response: Response{Type: TypeStreamMsgGetResponse, Error: NewNoMessageFoundError()}}, false},
		{TypeStreamMsgDeleteResponse, SuccessResponse{Response: Response{Type: TypeStreamMsgDeleteResponse, Error: e}}, false},
		{TypeConsumerCreateResponse, ConsumerInfoResponse{Response: Response{Type: TypeConsumerCreateResponse, Error: NewConsumerAlreadyExistsError()}}, false},
		{TypeConsumerInfoResponse, ConsumerInfoResponse{Response: Response{Type: TypeConsumerInfoResponse, Error: NewConsumerNotFoundError()}}, false},
		{TypeConsumerDeleteResponse, SuccessResponse{Response: Response{Type: TypeConsumerDeleteResponse, Error: NewConsumerNotFoundError()}}, false},
		{TypeAccountInfoResponse, AccountInfoResponse{Response: Response{Type: TypeAccountInfoResponse, Error: NewNotEnabledForAccountError()}}, false},
		{TypeStreamNamesResponse, StreamNamesResponse{Response: Response{Type: TypeStreamNamesResponse, Error: NewBadRequestError()}}, true},
		{TypeStreamListResponse, StreamListResponse{Response: Response{Type: TypeStreamListResponse, Error: NewBadRequestError()}}, false},
		{TypeConsumerNamesResponse, ConsumerNamesResponse{Response: Response{Type: TypeConsumerNamesResponse, Error: e}}, false},
		{TypeConsumerListResponse, ConsumerListResponse{Response: Response{Type: TypeConsumerListResponse, Error: e}}, false},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.reply)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		_ = json.Unmarshal(b, &doc)
		errs, err := validateAgainst(doc, c.typ)
		if err != nil {
			t.Fatal(err)
		}
		if failed := len(errs) > 0; failed != c.schemaFlawed {
			t.Errorf("%s: schema failures %v, expected failing=%v\n%s", c.typ, errs, c.schemaFlawed, b)
		}
	}
}

// TestValidatorCatchesBadReplies guards the test above against passing
// vacuously: members the schema forbids, or required ones missing, fail.
func TestValidatorCatchesBadReplies(t *testing.T) {
	si := sampleStreamInfo(t)
	cfg := map[string]any{}
	b, _ := json.Marshal(si.Config)
	_ = json.Unmarshal(b, &cfg)
	cfg["template_owner"] = "T" // why StreamConfig has no such member
	for name, reply := range map[string]any{
		"template_owner": map[string]any{"type": TypeStreamInfoResponse, "config": cfg, "created": sampleTime, "state": StreamState{}},
		"no config":      map[string]any{"type": TypeStreamInfoResponse, "created": sampleTime, "state": StreamState{}},
		"bad time":       map[string]any{"type": TypeStreamMsgGetResponse, "message": map[string]any{"subject": "a", "seq": 1, "time": "yesterday"}},
		"extra state":    map[string]any{"type": TypeStreamInfoResponse, "config": si.Config, "created": sampleTime, "state": map[string]any{"messages": 0, "bytes": 0, "first_seq": 0, "last_seq": 0, "consumer_count": 0, "x": 1}},
	} {
		b, _ := json.Marshal(reply)
		var doc any
		_ = json.Unmarshal(b, &doc)
		typ := doc.(map[string]any)["type"].(string)
		errs, err := validateAgainst(doc, typ)
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) == 0 {
			t.Errorf("%s: schema accepted %s", name, b)
		}
	}
}
