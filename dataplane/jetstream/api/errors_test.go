package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestWellKnownErrors pins the err_codes, statuses and descriptions that
// clients branch on (REFERENCES.md) to nats-server's values.
func TestWellKnownErrors(t *testing.T) {
	for _, c := range []struct {
		err    *Error
		code   ErrorCode
		status int
		desc   string
	}{
		{NewStreamNotFoundError(), 10059, 404, "stream not found"},
		{NewConsumerNotFoundError(), 10014, 404, "consumer not found"},
		{NewNoMessageFoundError(), 10037, 404, "no message found"},
		{NewStreamNameInUseError(), 10058, 400, "stream name already in use with a different configuration"},
		{NewStreamSubjectOverlapError(), 10065, 400, "subjects overlap with an existing stream"},
		{NewWrongLastSequenceError(41), 10071, 400, "wrong last sequence: 41"},
		{NewWrongLastMsgIDError("abc"), 10070, 400, "wrong last msg ID: abc"},
		{NewExpectedStreamMismatchError(), 10060, 400, "expected stream does not match"},
		{NewInsufficientResourcesError(), 10023, 503, "insufficient resources"},
		{NewStorageResourcesExceededError(), 10047, 500, "insufficient storage resources available"},
		{NewMemoryResourcesExceededError(), 10028, 500, "insufficient memory resources available"},
		{NewMaxStreamsReachedError(), 10027, 400, "maximum number of streams reached"},
		{NewMaxConsumersReachedError(), 10026, 400, "maximum consumers limit reached"},
		{NewNotEnabledForAccountError(), 10039, 503, "JetStream not enabled for account"},
		{NewNotEnabledError(), 10076, 503, "JetStream not enabled"},
		{NewBadRequestError(), 10003, 400, "bad request"},
		{NewInvalidJSONError(errors.New("unexpected end of JSON input")), 10025, 400, "invalid JSON: unexpected end of JSON input"},
		{NewConsumerAlreadyExistsError(), 10148, 400, "consumer already exists"},
		{NewConsumerDoesNotExistError(), 10149, 400, "consumer does not exist"},
		{NewStreamRollupFailedError(ErrCauseRollupNotPermitted), 10111, 500, "rollup not permitted"},
		{NewMessageTTLDisabledError(), 10166, 400, "per-message TTL is disabled"},
		{NewMessageTTLInvalidError(), 10165, 400, "invalid per-message TTL"},
		{NewReplicasNotSupportedError(), 10074, 500, "replicas > 1 not supported in non-clustered mode"},
		{NewClusterRequiredError(), 10010, 503, "JetStream clustering support required"},
		{NewMessageTooLargeError(), 10054, 400, "message size exceeds maximum allowed"},
		{NewHeaderTooLargeError(), 10097, 400, "header size exceeds maximum allowed of 64k"},
		{NewStreamSealedError(), 10109, 400, "invalid operation on sealed stream"},
		{NewStreamMsgDeleteFailedError(ErrCauseMsgDeleteNotPermitted), 10057, 500, "message delete not permitted"},
		{NewStreamPurgeFailedError(ErrCausePurgeNotPermitted), 10110, 500, "stream purge not permitted"},
		{NewStreamStoreFailedError(ErrCauseMaxMsgsPerSubject), 10077, 503, "maximum messages per subject exceeded"},
		{NewStreamInvalidConfigError(errors.New("x")), 10052, 500, "x"},
		{NewConsumerNameTooLongError(255), 10102, 400, "consumer name is too long, maximum allowed is 255"},
		{NewStreamNameContainsPathSeparatorsError(), 10128, 400, "Stream name can not contain path separators"},
		{NewSequenceNotFoundError(9), 10043, 400, "sequence 9 not found"},
		{NewExternalDeliverPrefixOverlapsError("p", "s.>"), 10022, 400, "stream external delivery prefix p overlaps with stream subject s.>"},
		{NewRestoreSubscribeFailedError("sub", errors.New("boom")), 10042, 500, "JetStream unable to subscribe to restore snapshot sub: boom"},
		{NewConsumerInactiveThresholdExcessError(5 * time.Second), 10153, 400, "consumer inactive threshold exceeds system limit of 5s"},
		{NewConsumerInvalidSamplingError(nil), 10095, 400, "failed to parse consumer sampling configuration: <nil>"},
	} {
		if c.err.ErrCode != c.code || c.err.Code != c.status || c.err.Description != c.desc {
			t.Errorf("%d: got %d/%d/%q, want %d/%q", c.code, c.err.ErrCode, c.err.Code, c.err.Description, c.status, c.desc)
		}
		if c.code.Status() != c.status {
			t.Errorf("%d: Status() = %d", c.code, c.code.Status())
		}
	}
}

func TestErrorTable(t *testing.T) {
	codes := Codes()
	if len(codes) < 200 {
		t.Fatalf("table has %d codes", len(codes))
	}
	for i, c := range codes {
		if i > 0 && codes[i-1] >= c {
			t.Fatalf("codes not sorted/unique at %d", c)
		}
		if c.Name() == "" || c.Status() < 300 || c.Status() > 699 {
			t.Errorf("%d: bad row %q %d", c, c.Name(), c.Status())
		}
	}
	if ErrorCode(1).Status() != 500 || ErrorCode(1).Name() != "" {
		t.Error("unknown code should read as a 500 with no name")
	}
}

func TestErrorJSON(t *testing.T) {
	b, err := json.Marshal(StreamCreateResponse{Response: Response{Type: TypeStreamCreateResponse, Error: NewStreamNotFoundError()}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back StreamCreateResponse
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(back.ToError(), CodeStreamNotFound) || back.StreamInfo != nil {
		t.Fatalf("decoded %+v", back)
	}
	var ok Response
	if ok.ToError() != nil {
		t.Fatal("a reply without error must give a nil error")
	}
}

func TestErrorsIs(t *testing.T) {
	err := fmt.Errorf("create: %w", NewStreamNotFoundError())
	if !errors.Is(err, CodeStreamNotFound) || errors.Is(err, CodeConsumerNotFound) {
		t.Fatal("errors.Is by code")
	}
	if !errors.Is(err, &Error{ErrCode: CodeStreamNotFound}) {
		t.Fatal("errors.Is by *Error")
	}
	if got := NewStreamNotFoundError().Error(); got != "stream not found (10059)" {
		t.Fatalf("Error() = %q", got)
	}
	if CodeWrongLastSequence.Error() != "wrong last sequence: {seq}" {
		t.Fatalf("code text = %q", CodeWrongLastSequence.Error())
	}
}

func TestPrefer(t *testing.T) {
	inner := NewStreamSealedError()
	fallback := NewStreamStoreFailedError(errors.New("disk"))
	if got := Prefer(fmt.Errorf("wrapped: %w", inner), fallback); got != inner {
		t.Fatalf("Prefer kept %v", got)
	}
	if got := Prefer(errors.New("plain"), fallback); got != fallback {
		t.Fatalf("Prefer gave %v", got)
	}
	if got := Prefer(nil, fallback); got != fallback {
		t.Fatalf("Prefer(nil) gave %v", got)
	}
}
