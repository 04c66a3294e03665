package config

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/contrail/contrail/dataplane/config/conf"
)

// decoder collects every problem instead of stopping at the first.
type decoder struct {
	file string // the top file; positions elsewhere name their file
	errs []error
	// Where no_auth_user and system_account were given, for checkAuth.
	noAuthUserPos, systemAccountPos conf.Pos
}

func (d *decoder) fail(pos conf.Pos, sentinel error, format string, args ...any) {
	e := &FieldError{Line: pos.Line, Msg: fmt.Sprintf(format, args...), Err: sentinel}
	if pos.File != d.file {
		e.File = pos.File
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) typeErr(path string, v *conf.Value, want string) {
	d.fail(v.Pos, nil, "%s: expected %s, got %s", path, want, v.Describe())
}

// field decodes one key's value into a T.
type field[T any] func(d *decoder, dst *T, path string, v *conf.Value)

// decodeMap applies m's entries to dst in file order. Keys match without
// regard to case, as in nats-server.
func decodeMap[T any](d *decoder, dst *T, prefix string, m *conf.Map, fields map[string]field[T], unsupported map[string]bool) {
	for _, e := range m.Entries() {
		key := strings.ToLower(e.Key)
		path := e.Key
		if prefix != "" {
			path = prefix + "." + e.Key
		}
		switch f, ok := fields[key]; {
		case ok:
			f(d, dst, path, e.Value)
		case unsupported[key]:
			d.fail(e.KeyPos, ErrUnsupported, "%q is not supported by Contrail", path)
		case e.Used:
			// Defined to be referenced as $variable; nats-server allows it.
		default:
			d.fail(e.KeyPos, ErrUnknownKey, "unknown key %q", path)
		}
	}
}

// blockField decodes a key whose value is a block (a map) into a fresh
// *B, starting from fresh's defaults, and hands the result to set.
func blockField[T, B any](fields map[string]field[B], unsupported map[string]bool, fresh func() *B, set func(*T, *B)) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if v.Kind != conf.KindMap {
			d.typeErr(path, v, "map")
			return
		}
		b := fresh()
		decodeMap(d, b, path, v.Map, fields, unsupported)
		set(dst, b)
	}
}

func stringField[T any](sel func(*T) *string) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if v.Kind != conf.KindString {
			d.typeErr(path, v, "string")
			return
		}
		*sel(dst) = v.Str
	}
}

func boolField[T any](sel func(*T) *bool) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if v.Kind != conf.KindBool {
			d.typeErr(path, v, "boolean")
			return
		}
		*sel(dst) = v.Bool
	}
}

func durationField[T any](sel func(*T) *time.Duration) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if dur, ok := d.duration(path, v); ok {
			*sel(dst) = dur
		}
	}
}

// intField decodes an integer into any integer-typed field, rejecting
// values the field cannot hold.
func intField[T any, N int | int32 | int64](sel func(*T) *N) field[T] {
	return func(d *decoder, dst *T, path string, v *conf.Value) {
		if n, ok := d.integer(path, v); ok {
			if int64(N(n)) != n {
				d.fail(v.Pos, nil, "%s: %d is out of range", path, n)
				return
			}
			*sel(dst) = N(n)
		}
	}
}

func (d *decoder) integer(path string, v *conf.Value) (int64, bool) {
	if v.Kind != conf.KindInt {
		d.typeErr(path, v, "integer")
		return 0, false
	}
	return v.Int, true
}

// duration accepts a Go duration string ("10s", "1h30m") or, for
// compatibility with older nats-server files, a number of seconds.
func (d *decoder) duration(path string, v *conf.Value) (time.Duration, bool) {
	switch v.Kind {
	case conf.KindString:
		dur, err := time.ParseDuration(v.Str)
		if err != nil {
			d.fail(v.Pos, nil, "%s: invalid duration %q (want e.g. \"10s\", \"2m\", \"1h30m\")", path, v.Str)
			return 0, false
		}
		return dur, true
	case conf.KindInt:
		if hasSizeSuffix(v.Raw) {
			// nats-server reads an unquoted 2m as 2000000 seconds.
			d.fail(v.Pos, nil, "%s: unquoted %s is the integer %d, not a duration; quote it: \"%s\"", path, v.Raw, v.Int, v.Raw)
			return 0, false
		}
		return seconds(d, path, v, float64(v.Int))
	case conf.KindFloat:
		return seconds(d, path, v, v.Float)
	}
	d.typeErr(path, v, "duration")
	return 0, false
}

func seconds(d *decoder, path string, v *conf.Value, s float64) (time.Duration, bool) {
	if math.Abs(s) > float64(math.MaxInt64)/float64(time.Second) {
		d.fail(v.Pos, nil, "%s: %s seconds is out of range", path, v.Raw)
		return 0, false
	}
	return time.Duration(s * float64(time.Second)), true
}

func hasSizeSuffix(raw string) bool {
	if raw == "" {
		return false
	}
	c := raw[len(raw)-1]
	return (c < '0' || c > '9') && c != '.'
}

// hostPort decodes nats-server's listen forms: a port, or host:port.
func (d *decoder) hostPort(path string, v *conf.Value) (host string, port int, ok bool) {
	switch v.Kind {
	case conf.KindInt:
		if v.Int < math.MinInt32 || v.Int > math.MaxInt32 {
			d.fail(v.Pos, nil, "%s: port %d is out of range", path, v.Int)
			return "", 0, false
		}
		return "", int(v.Int), true
	case conf.KindString:
		h, p, err := net.SplitHostPort(v.Str)
		if err != nil {
			d.fail(v.Pos, nil, "%s: %q is not a port or host:port", path, v.Str)
			return "", 0, false
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			d.fail(v.Pos, nil, "%s: invalid port %q in %q", path, p, v.Str)
			return "", 0, false
		}
		return h, n, true
	}
	d.typeErr(path, v, "port or host:port")
	return "", 0, false
}
