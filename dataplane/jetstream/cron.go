package jetstream

import (
	"strconv"
	"strings"
	"time"
)

// Cron schedules as nats-server reads them: six fields (second, minute,
// hour, day of month, month, day of week), each a comma list of "*" (or
// "?"), a number or name, or a range "a-b", any of them with a "/step"
// ("a/step" runs to the field's end). Days match when both the day of
// month and the day of week do if either field has a plain "*", and when
// either does otherwise, as in classic cron.

// cronField is one field's bounds and names.
type cronField struct {
	lo, hi uint
	names  map[string]uint
}

var cronFields = [6]cronField{
	{0, 59, nil}, {0, 59, nil}, {0, 23, nil}, {1, 31, nil},
	{1, 12, map[string]uint{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{0, 6, map[string]uint{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// cronSpec is a parsed pattern: per field the set of values, and for the
// two day fields whether a plain "*" was among them.
type cronSpec struct {
	set            [6]uint64
	domAny, dowAny bool
}

// cronAliases are the named patterns.
var cronAliases = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

func parseCronSpec(pattern string) (cronSpec, bool) {
	if alias, ok := cronAliases[pattern]; ok {
		pattern = alias
	}
	var c cronSpec
	fields := strings.Fields(pattern)
	if len(fields) != 6 {
		return c, false
	}
	for i, f := range fields {
		for _, part := range strings.Split(f, ",") {
			if part == "" {
				continue
			}
			bits, star, ok := parseCronPart(part, cronFields[i])
			if !ok {
				return c, false
			}
			c.set[i] |= bits
			switch {
			case star && i == 3:
				c.domAny = true
			case star && i == 5:
				c.dowAny = true
			}
		}
	}
	// An empty field never matches: nats-server searches five years
	// before it gives up; it is refused here at once.
	if c.set[0] == 0 || c.set[1] == 0 || c.set[2] == 0 || c.set[4] == 0 || c.set[3]|c.set[5] == 0 {
		return c, false
	}
	return c, true
}

// parseCronPart reads one list element; star reports a "*" without a
// step above one.
func parseCronPart(part string, f cronField) (bits uint64, star, ok bool) {
	rng, stepStr, hasStep := strings.Cut(part, "/")
	if strings.Count(stepStr, "/") > 0 {
		return 0, false, false
	}
	var lo, hi uint
	a, b, isRange := strings.Cut(rng, "-")
	switch {
	case a == "*" || a == "?":
		// What follows a star's hyphen is ignored, as nats-server does.
		lo, hi, star = f.lo, f.hi, true
	default:
		if strings.Contains(b, "-") {
			return 0, false, false
		}
		var okA, okB bool
		lo, okA = cronNumber(a, f)
		hi, okB = lo, true
		if isRange {
			hi, okB = cronNumber(b, f)
		} else if hasStep {
			hi = f.hi
		}
		if !okA || !okB {
			return 0, false, false
		}
	}
	step := uint(1)
	if hasStep {
		n, err := strconv.Atoi(stepStr)
		if err != nil || n < 0 {
			return 0, false, false
		}
		step = uint(n)
		if step > 1 {
			star = false
		}
	}
	if lo < f.lo || hi > f.hi || lo > hi || step == 0 {
		return 0, false, false
	}
	for v := lo; v <= hi; v += step {
		bits |= 1 << v
	}
	return bits, star, true
}

func cronNumber(s string, f cronField) (uint, bool) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return uint(n), true
}

func (c *cronSpec) has(field int, v int) bool { return c.set[field]&(1<<uint(v)) != 0 }

func (c *cronSpec) dayMatches(t time.Time) bool {
	dom, dow := c.has(3, t.Day()), c.has(5, int(t.Weekday()))
	if c.domAny || c.dowAny {
		return dom && dow
	}
	return dom || dow
}

// next is the first time after from (from the next whole second) that
// the pattern matches in loc; ok is false when none comes within five
// years.
func (c *cronSpec) next(from time.Time, loc *time.Location) (time.Time, bool) {
	t := from.In(loc).Truncate(time.Second).Add(time.Second)
	limit := t.Year() + 5
	for t.Year() <= limit {
		y, mo, d := t.Date()
		h, mi, _ := t.Clock()
		switch {
		case !c.has(4, int(mo)):
			t = time.Date(y, mo+1, 1, 0, 0, 0, 0, loc)
		case !c.dayMatches(t):
			t = time.Date(y, mo, d+1, 0, 0, 0, 0, loc)
		case !c.has(2, h):
			t = time.Date(y, mo, d, h+1, 0, 0, 0, loc)
		case !c.has(1, mi):
			t = time.Date(y, mo, d, h, mi+1, 0, 0, loc)
		case !c.has(0, t.Second()):
			t = t.Add(time.Second)
		default:
			return t, true
		}
	}
	return time.Time{}, false
}
