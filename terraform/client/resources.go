package client

import (
	"context"
	"time"
)

// Limits are an account's limits; -1 is unlimited.
type Limits struct {
	MaxConnections int64           `json:"max_connections"`
	MaxPayload     int64           `json:"max_payload"`
	JetStream      JetStreamLimits `json:"jetstream"`
}

// JetStreamLimits bound an account's JetStream use; max_memory and
// max_storage both 0 turn JetStream off.
type JetStreamLimits struct {
	MaxMemory     int64 `json:"max_memory"`
	MaxStorage    int64 `json:"max_storage"`
	MaxStreams    int64 `json:"max_streams"`
	MaxConsumers  int64 `json:"max_consumers"`
	MaxAckPending int64 `json:"max_ack_pending"`
	// Tiers, when set, replace the limits above with per replica count
	// ones; always sent, so nil (JSON null) removes them.
	Tiers *JetStreamTiers `json:"tiers"`
}

// JetStreamTiers are tiered limits: R1 for unreplicated streams, R3 for
// streams of three replicas. A tier left out allows no stream of its
// replica count.
type JetStreamTiers struct {
	R1 *JetStreamTier `json:"R1,omitempty"`
	R3 *JetStreamTier `json:"R3,omitempty"`
}

// JetStreamTier bounds the streams of one replica count.
type JetStreamTier struct {
	MaxMemory      int64 `json:"max_memory"`
	MaxStorage     int64 `json:"max_storage"`
	MaxStreams     int64 `json:"max_streams"`
	MaxConsumers   int64 `json:"max_consumers"`
	MaxAckPending  int64 `json:"max_ack_pending"`
	MaxStreamBytes int64 `json:"max_stream_bytes"`
}

// Account is a NATS account.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	PublicKey string    `json:"public_key"`
	NatsURL   string    `json:"nats_url"`
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
	// InSync says the account's cell has its latest JWT.
	InSync bool `json:"in_sync"`
}

// AccountRequest creates or changes an account.
type AccountRequest struct {
	Name   string  `json:"name"`
	Limits *Limits `json:"limits,omitempty"`
}

// Accounts lists the organization's accounts.
func (c *Client) Accounts(ctx context.Context) ([]Account, error) {
	var out items[Account]
	err := c.do(ctx, "GET", "/v1/accounts", nil, &out)
	return out.Items, err
}

// Account reads one account.
func (c *Client) Account(ctx context.Context, id string) (*Account, error) {
	var a Account
	if err := c.do(ctx, "GET", "/v1/accounts/"+seg(id), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// CreateAccount creates an account.
func (c *Client) CreateAccount(ctx context.Context, req AccountRequest) (*Account, error) {
	var a Account
	if err := c.do(ctx, "POST", "/v1/accounts", req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UpdateAccount renames an account and sets its limits.
func (c *Client) UpdateAccount(ctx context.Context, id string, req AccountRequest) (*Account, error) {
	var a Account
	if err := c.do(ctx, "PATCH", "/v1/accounts/"+seg(id), req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// DeleteAccount deletes an account.
func (c *Client) DeleteAccount(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/accounts/"+seg(id), nil, nil)
}

// Permission is one direction's allow and deny subjects.
type Permission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// Permissions restrict what a user may publish and subscribe to.
type Permissions struct {
	Publish   Permission `json:"publish"`
	Subscribe Permission `json:"subscribe"`
}

// User is a NATS user of an account. Creds is set only in the answer
// that creates it.
type User struct {
	ID          string       `json:"id"`
	Name        string       `json:"name"`
	PublicKey   string       `json:"public_key"`
	Permissions *Permissions `json:"permissions,omitempty"`
	ExpiresAt   *time.Time   `json:"expires_at,omitempty"`
	CreatedAt   time.Time    `json:"created_at"`
	Creds       string       `json:"creds,omitempty"`
}

// UserRequest creates a user.
type UserRequest struct {
	Name             string       `json:"name"`
	Permissions      *Permissions `json:"permissions,omitempty"`
	ExpiresInSeconds *int64       `json:"expires_in_seconds,omitempty"`
}

// CreateUser creates a user; the answer carries its creds, once.
func (c *Client) CreateUser(ctx context.Context, accountID string, req UserRequest) (*User, error) {
	var u User
	if err := c.do(ctx, "POST", "/v1/accounts/"+seg(accountID)+"/users", req, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// User finds one user of an account (ErrNotFound if there is none).
func (c *Client) User(ctx context.Context, accountID, id string) (*User, error) {
	var out items[User]
	if err := c.do(ctx, "GET", "/v1/accounts/"+seg(accountID)+"/users", nil, &out); err != nil {
		return nil, err
	}
	for i := range out.Items {
		if out.Items[i].ID == id {
			return &out.Items[i], nil
		}
	}
	return nil, &Error{Status: 404, Title: "Not Found", Detail: "user " + id + " not found"}
}

// DeleteUser revokes a user.
func (c *Client) DeleteUser(ctx context.Context, accountID, id string) error {
	return c.do(ctx, "DELETE", "/v1/accounts/"+seg(accountID)+"/users/"+seg(id), nil, nil)
}

// Token is an API token; Token (the secret) is set only in the answer
// that creates it.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Token     string    `json:"token,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TokenRequest creates a token.
type TokenRequest struct {
	Name       string `json:"name"`
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
}

// CreateToken creates an API token of the caller.
func (c *Client) CreateToken(ctx context.Context, req TokenRequest) (*Token, error) {
	var t Token
	if err := c.do(ctx, "POST", "/v1/tokens", req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Token finds one of the caller's API tokens (ErrNotFound if there is
// none: revoked, expired, or another person's).
func (c *Client) Token(ctx context.Context, id string) (*Token, error) {
	var out items[Token]
	if err := c.do(ctx, "GET", "/v1/tokens", nil, &out); err != nil {
		return nil, err
	}
	for i := range out.Items {
		if out.Items[i].ID == id {
			return &out.Items[i], nil
		}
	}
	return nil, &Error{Status: 404, Title: "Not Found", Detail: "token " + id + " not found"}
}

// DeleteToken revokes a token.
func (c *Client) DeleteToken(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/tokens/"+seg(id), nil, nil)
}

// StreamConfig is the stream config the API manages, in JetStream's
// field names and units (durations in nanoseconds).
type StreamConfig struct {
	Description          string            `json:"description,omitempty"`
	Subjects             []string          `json:"subjects,omitempty"`
	Retention            string            `json:"retention"`
	MaxConsumers         int64             `json:"max_consumers"`
	MaxMsgs              int64             `json:"max_msgs"`
	MaxBytes             int64             `json:"max_bytes"`
	MaxAge               int64             `json:"max_age"`
	MaxMsgsPerSubject    int64             `json:"max_msgs_per_subject"`
	MaxMsgSize           int64             `json:"max_msg_size"`
	Discard              string            `json:"discard"`
	DiscardNewPerSubject bool              `json:"discard_new_per_subject"`
	Storage              string            `json:"storage"`
	Replicas             int64             `json:"num_replicas"`
	DuplicateWindow      int64             `json:"duplicate_window"`
	Compression          string            `json:"compression"`
	NoAck                bool              `json:"no_ack"`
	AllowRollup          bool              `json:"allow_rollup_hdrs"`
	DenyDelete           bool              `json:"deny_delete"`
	DenyPurge            bool              `json:"deny_purge"`
	AllowDirect          bool              `json:"allow_direct"`
	AllowMsgTTL          bool              `json:"allow_msg_ttl"`
	Metadata             map[string]string `json:"metadata,omitempty"`
	RePublish            *RePublish        `json:"republish,omitempty"`
}

// RePublish sends each stored message on again to another subject.
type RePublish struct {
	Source      string `json:"src,omitempty"`
	Destination string `json:"dest"`
	HeadersOnly bool   `json:"headers_only,omitempty"`
}

// Stream is a stream's config and state.
type Stream struct {
	Name   string       `json:"name"`
	Config StreamConfig `json:"config"`
	State  struct {
		Messages  uint64 `json:"messages"`
		Bytes     uint64 `json:"bytes"`
		FirstSeq  uint64 `json:"first_seq"`
		LastSeq   uint64 `json:"last_seq"`
		Consumers int    `json:"consumer_count"`
	} `json:"state"`
	Created time.Time `json:"created"`
}

// StreamSummary is a stream as the account's stream list shows it.
type StreamSummary struct {
	Name     string   `json:"name"`
	Subjects []string `json:"subjects"`
	Messages uint64   `json:"messages"`
	Bytes    uint64   `json:"bytes"`
}

func streamPath(accountID, name string) string {
	return "/v1/accounts/" + seg(accountID) + "/streams/" + seg(name)
}

// Streams lists an account's streams.
func (c *Client) Streams(ctx context.Context, accountID string) ([]StreamSummary, error) {
	var out items[StreamSummary]
	err := c.do(ctx, "GET", "/v1/accounts/"+seg(accountID)+"/streams", nil, &out)
	return out.Items, err
}

// Stream reads one stream.
func (c *Client) Stream(ctx context.Context, accountID, name string) (*Stream, error) {
	var s Stream
	if err := c.do(ctx, "GET", streamPath(accountID, name), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// CreateStream creates a stream.
func (c *Client) CreateStream(ctx context.Context, accountID, name string, cfg StreamConfig) (*Stream, error) {
	var s Stream
	if err := c.do(ctx, "POST", streamPath(accountID, name), cfg, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// UpdateStream replaces a stream's config in place.
func (c *Client) UpdateStream(ctx context.Context, accountID, name string, cfg StreamConfig) (*Stream, error) {
	var s Stream
	if err := c.do(ctx, "PUT", streamPath(accountID, name), cfg, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteStream deletes a stream and its messages.
func (c *Client) DeleteStream(ctx context.Context, accountID, name string) error {
	return c.do(ctx, "DELETE", streamPath(accountID, name), nil, nil)
}
