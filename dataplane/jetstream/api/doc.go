// Package api holds the JetStream wire contract: the JSON request and
// response types of the $JS.API subjects, the table of API errors, and the
// pure defaulting and validation rules nats-server applies to stream and
// consumer configurations.
//
// Stock clients (nats.go, and natscli through jsm.go, which checks every
// successful reply against its JSON schemas) decode these bytes, so field
// names, omitempty rules, enum spellings, `type` strings, err_codes and
// error descriptions follow nats-server 2.x exactly. Nothing here does I/O
// or keeps state; handlers build these values and marshal them.
//
// Times are time.Time and marshal as RFC 3339 with nanoseconds; callers
// must pass UTC values, as nats-server writes "…Z" times. Durations are
// time.Duration and marshal as integer nanoseconds.
package api
