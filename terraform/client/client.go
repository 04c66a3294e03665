// Package client is a small client of Contrail's control-plane REST API
// (openapi/openapi.yaml), as the Terraform provider uses it. It speaks
// only the public contract: bearer token auth, JSON bodies, and
// application/problem+json errors, which it returns as *Error.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrNotFound is wrapped by every error for a 404: the resource is gone
// (or belongs to another organization, which the API does not tell).
var ErrNotFound = errors.New("not found")

// ErrNotConfigured is returned by a nil *Client: the provider had no
// endpoint and token to make one with.
var ErrNotConfigured = errors.New("the contrail provider is not configured (endpoint and token unknown)")

// Error is a problem the API answered (RFC 9457).
type Error struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Field is the request field at fault, as a dotted path, if any.
	Field string `json:"field"`
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Title, e.Detail)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Title)
}

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *Error) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// Client calls one control plane with one token.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the control plane at endpoint (its base URL,
// like http://127.0.0.1:8080) acting with token.
func New(endpoint, token string) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: must be an http:// or https:// URL", endpoint)
	}
	if token == "" {
		return nil, errors.New("token: an API token is required")
	}
	return &Client{base: strings.TrimRight(endpoint, "/"), token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// do sends one request (in, if not nil, as the JSON body) and decodes a
// 2xx answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if c == nil {
		// A provider whose endpoint or token was unknown at plan time.
		return ErrNotConfigured
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{}
		if json.Unmarshal(data, e) != nil || e.Status == 0 {
			e = &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(data))}
		}
		return fmt.Errorf("%s %s: %w", method, path, e)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

func seg(s string) string { return url.PathEscape(s) }

type items[T any] struct {
	Items []T `json:"items"`
}
