// Package subject holds NATS subject rules: validation of publish and
// subscribe subjects, wildcard matching, and the subscription index that
// routes a published subject to its interested subscribers.
package subject

// Token separators and wildcards of the NATS subject grammar.
const (
	sep    = '.'
	pwc    = '*' // matches exactly one token
	fwc    = '>' // matches one or more trailing tokens
	maxLen = 1 << 16
)

// ValidLiteral reports whether s may be published to: non-empty tokens, no
// wildcards, no whitespace. Publishing to anything else cannot be matched
// the way a subscriber expects.
func ValidLiteral(s []byte) bool {
	return valid(s, false)
}

// ValidFilter reports whether s may be subscribed to: non-empty tokens,
// '*' and '>' only as whole tokens, '>' only last, no whitespace.
func ValidFilter(s []byte) bool {
	return valid(s, true)
}

// ValidLiteralString is ValidLiteral for strings.
func ValidLiteralString(s string) bool { return valid([]byte(s), false) }

// ValidFilterString is ValidFilter for strings.
func ValidFilterString(s string) bool { return valid([]byte(s), true) }

func valid(s []byte, wildcards bool) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	tokStart := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != sep {
			switch s[i] {
			case ' ', '\t', '\r', '\n', 0:
				return false
			}
			continue
		}
		tok := s[tokStart:i]
		if len(tok) == 0 {
			return false
		}
		if len(tok) == 1 && (tok[0] == pwc || tok[0] == fwc) {
			if !wildcards {
				return false
			}
			if tok[0] == fwc && i != len(s) {
				return false
			}
		}
		tokStart = i + 1
	}
	return true
}

// IsLiteral reports whether a valid filter has no wildcard tokens.
func IsLiteral(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == pwc || c == fwc) && (i == 0 || s[i-1] == sep) && (i+1 == len(s) || s[i+1] == sep) {
			return false
		}
	}
	return true
}

// Matches reports whether the literal subject matches filter, which may
// hold wildcards. Both are assumed valid.
func Matches(filter, literal string) bool {
	for {
		ft, frest, fmore := cut(filter)
		lt, lrest, lmore := cut(literal)
		switch {
		case ft == ">":
			return true
		case ft != "*" && ft != lt:
			return false
		}
		if !fmore || !lmore {
			return fmore == lmore
		}
		filter, literal = frest, lrest
	}
}

// SubsetOf reports whether every subject matched by filter a is also
// matched by filter b.
func SubsetOf(a, b string) bool {
	for {
		at, arest, amore := cut(a)
		bt, brest, bmore := cut(b)
		switch {
		case bt == ">":
			return true
		case at == ">":
			return false
		case bt == "*":
		case at == "*" || at != bt:
			return false
		}
		if !amore || !bmore {
			return amore == bmore
		}
		a, b = arest, brest
	}
}

// Overlaps reports whether some literal subject is matched by both filters.
func Overlaps(a, b string) bool {
	for {
		at, arest, amore := cut(a)
		bt, brest, bmore := cut(b)
		if at == ">" || bt == ">" {
			return true
		}
		if at != "*" && bt != "*" && at != bt {
			return false
		}
		if !amore || !bmore {
			return amore == bmore
		}
		a, b = arest, brest
	}
}

// cut splits the first token off s.
func cut(s string) (tok, rest string, more bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
