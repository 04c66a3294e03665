package conf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// zuluLayout is the only datetime form nats-server accepts.
const zuluLayout = "2006-01-02T15:04:05Z"

// sizeSuffixes are nats-server's integer suffixes, matched without regard
// to case: a bare letter is a power of 1000, a letter followed by b, i or
// ib is a power of 1024. So 1k is 1000 but 1kb, 1ki and 1kib are 1024.
var sizeSuffixes = map[string]int64{
	"k": 1e3, "kb": 1 << 10, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1 << 20, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1 << 30, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1 << 40, "ti": 1 << 40, "tib": 1 << 40,
	"p": 1e15, "pb": 1 << 50, "pi": 1 << 50, "pib": 1 << 50,
	"e": 1e18, "eb": 1 << 60, "ei": 1 << 60, "eib": 1 << 60,
}

// classify types an unquoted token. Only malformed numbers are errors;
// anything else that is not a boolean, number or datetime is a string.
func classify(tok string) (*Value, error) {
	if b, ok := parseBool(tok); ok {
		return &Value{Kind: KindBool, Bool: b, Raw: tok}, nil
	}
	if looksNumeric(tok) {
		v, err := parseNumber(tok)
		if err != nil || v != nil {
			return v, err
		}
		if t, err := time.Parse(zuluLayout, tok); err == nil {
			return &Value{Kind: KindTime, Time: t, Raw: tok}, nil
		}
	}
	return &Value{Kind: KindString, Str: tok, Raw: tok}, nil
}

func parseBool(tok string) (bool, bool) {
	switch strings.ToLower(tok) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func looksNumeric(tok string) bool {
	if tok[0] == '-' {
		return len(tok) > 1 && isDigit(tok[1])
	}
	return isDigit(tok[0])
}

// parseNumber reads an integer (with an optional size suffix) or a float.
// It returns nil, nil when tok is not shaped like either.
func parseNumber(tok string) (*Value, error) {
	i := 0
	if tok[0] == '-' {
		i = 1
	}
	for i < len(tok) && isDigit(tok[i]) {
		i++
	}
	digits, rest := tok[:i], tok[i:]
	if rest == "" {
		n, err := parseInt(digits, tok)
		if err != nil {
			return nil, err
		}
		return &Value{Kind: KindInt, Int: n, Raw: tok}, nil
	}
	if isFraction(rest) {
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			return nil, fmt.Errorf("float %s is out of range", tok)
		}
		return &Value{Kind: KindFloat, Float: f, Raw: tok}, nil
	}
	mult, ok := sizeSuffixes[strings.ToLower(rest)]
	if !ok {
		return nil, nil
	}
	n, err := parseInt(digits, tok)
	if err != nil {
		return nil, err
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return nil, fmt.Errorf("integer %s is out of range", tok)
	}
	return &Value{Kind: KindInt, Int: n * mult, Raw: tok}, nil
}

func parseInt(digits, tok string) (int64, error) {
	n, err := strconv.ParseInt(digits, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("integer %s is out of range", tok)
	}
	if err != nil {
		return 0, fmt.Errorf("invalid integer %s", tok)
	}
	return n, nil
}

func isFraction(s string) bool {
	if len(s) < 2 || s[0] != '.' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
