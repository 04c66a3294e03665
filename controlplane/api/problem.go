package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// ProblemBase is the prefix of every problem type URI; the last path
// segment names the kind of problem (validation, unauthorized, …), as
// openapi.yaml lists them.
const ProblemBase = "https://contrail.dev/problems/"

// Problem is an RFC 9457 problem detail, the body of every error.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the request field a validation problem is about, as a
	// dotted path ("limits.jetstream.max_streams").
	Field string `json:"field,omitempty"`
	// retryAfter, when set, becomes the Retry-After header (seconds).
	retryAfter int
}

func (p *Problem) Error() string {
	if p.Field != "" {
		return fmt.Sprintf("%d %s: %s: %s", p.Status, p.Title, p.Field, p.Detail)
	}
	return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail)
}

func problem(status int, kind, title, detail string) *Problem {
	return &Problem{Type: ProblemBase + kind, Title: title, Status: status, Detail: detail}
}

// invalid is a 400 naming the field at fault.
func invalid(field, detail string) *Problem {
	p := problem(http.StatusBadRequest, "validation", "Invalid request", field+": "+detail)
	p.Field = field
	return p
}

// tooLarge is a 413 naming the field (the body) that is too large.
func tooLarge(field, detail string) *Problem {
	p := problem(http.StatusRequestEntityTooLarge, "too-large", "Request too large", field+": "+detail)
	p.Field = field
	return p
}

func unauthorized(detail string) *Problem {
	return problem(http.StatusUnauthorized, "unauthorized", "Unauthorized", detail)
}

func notFound(what string) *Problem {
	return problem(http.StatusNotFound, "not-found", "Not found", what+" not found")
}

func conflict(detail string) *Problem {
	return problem(http.StatusConflict, "conflict", "Conflict", detail)
}

// tooManyRequests is a 429 with a Retry-After of wait (rounded up to a
// whole second). why says what was too many.
func tooManyRequests(why string, wait time.Duration) *Problem {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	p := problem(http.StatusTooManyRequests, "too-many-requests", "Too many requests",
		why+"; retry after "+strconv.Itoa(secs)+" s")
	p.retryAfter = secs
	return p
}

func cellUnavailable(detail string) *Problem {
	return problem(http.StatusServiceUnavailable, "cell-unavailable", "Cell unavailable", detail)
}

// errorHandler renders every error as application/problem+json: our
// Problems as they are, echo's own errors (unknown route, wrong method,
// body too large) by status, anything else as a 500 whose detail is
// logged, not sent.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var p *Problem
	var he *echo.HTTPError
	switch {
	case errors.As(err, &p):
	case errors.As(err, &he):
		kinds := map[int]string{
			http.StatusNotFound:              "not-found",
			http.StatusMethodNotAllowed:      "method-not-allowed",
			http.StatusRequestEntityTooLarge: "too-large",
			http.StatusUnauthorized:          "unauthorized",
			http.StatusBadRequest:            "validation",
			http.StatusUnsupportedMediaType:  "unsupported-media-type",
		}
		kind, ok := kinds[he.Code]
		if !ok {
			kind = "internal"
		}
		p = problem(he.Code, kind, http.StatusText(he.Code), fmt.Sprint(he.Message))
	default:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Path(), "err", err)
		p = problem(http.StatusInternalServerError, "internal", "Internal server error", "see the control plane's log")
	}
	if p.retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	if c.Request().Method == http.MethodHead {
		return
	}
	if err := jsonEncode(c.Response(), p); err != nil {
		s.log.Debug("writing problem", "err", err)
	}
}
