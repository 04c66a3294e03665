package api

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Subject mapping destinations appear in stream subject transforms, in
// mirror and source transforms, and in republish rules. The checks here
// are the syntactic ones a config must pass to be accepted; applying a
// mapping to a subject is the job of the transform engine, not of this
// package.

var (
	// mappingFunction matches a {{fn(args)}} destination token, capturing
	// the function name and its arguments. Names are matched loosely on
	// letter case below, as nats-server accepts "splitFromLeft" and
	// "SplitFromLeft" alike.
	mappingFunction = regexp.MustCompile(`^\{\{\s*([A-Za-z]+)\s*\((.*)\)\s*\}\}$`)
	mappingNames    = map[string]bool{
		"partition": true, "wildcard": true, "splitfromleft": true, "splitfromright": true,
		"slicefromleft": true, "slicefromright": true, "split": true, "left": true,
		"right": true, "random": true,
	}
	legacyWildcardRef = regexp.MustCompile(`^\$(\d+)$`)
)

var errBadMapping = errors.New("invalid subject mapping destination")

// checkMapping reports whether dest is a usable destination for subjects
// matching src (empty src meaning ">"): tokens non-empty, no '*', '>' last
// in both or in neither, mapping functions known, wildcard references
// within the number of '*' tokens of src. An empty dest is allowed (it
// means "no mapping").
func checkMapping(src, dest string) error {
	if dest == "" {
		return nil
	}
	if src == "" {
		src = ">"
	}
	srcTokens := strings.Split(src, ".")
	stars := 0
	for _, t := range srcTokens {
		if t == "*" {
			stars++
		}
	}
	srcFWC := srcTokens[len(srcTokens)-1] == ">"
	tokens := strings.Split(dest, ".")
	if destFWC := tokens[len(tokens)-1] == ">"; srcFWC != destFWC {
		return fmt.Errorf("%w: '>' must end both source and destination or neither", errBadMapping)
	}
	for i, t := range tokens {
		switch {
		case t == "" || t == "*":
			return fmt.Errorf("%w: %q token", errBadMapping, t)
		case t == ">":
			if i != len(tokens)-1 {
				return fmt.Errorf("%w: %q", errBadMapping, t)
			}
		case strings.HasPrefix(t, "{{"):
			if err := checkMappingFunction(t, stars); err != nil {
				return err
			}
		case legacyWildcardRef.MatchString(t):
			n, _ := strconv.Atoi(t[1:])
			if n < 1 || n > stars {
				return fmt.Errorf("%w: %s: wildcard index out of range", errBadMapping, t)
			}
		case strings.ContainsAny(t, " \t\r\n\f"):
			return fmt.Errorf("%w: %q", errBadMapping, t)
		}
	}
	return nil
}

// checkMappingFunction checks one {{fn(args)}} token.
func checkMappingFunction(tok string, stars int) error {
	m := mappingFunction.FindStringSubmatch(tok)
	if m == nil || !mappingNames[strings.ToLower(m[1])] {
		return fmt.Errorf("%w: %s: unknown function", errBadMapping, tok)
	}
	fn := strings.ToLower(m[1])
	var args []string
	if a := strings.TrimSpace(m[2]); a != "" {
		for _, s := range strings.Split(a, ",") {
			args = append(args, strings.TrimSpace(s))
		}
	}
	index := func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > stars {
			return fmt.Errorf("%w: %s: wildcard index out of range", errBadMapping, tok)
		}
		return nil
	}
	switch fn {
	case "wildcard":
		if len(args) != 1 {
			return fmt.Errorf("%w: %s: wants one argument", errBadMapping, tok)
		}
		return index(args[0])
	case "partition":
		if len(args) < 1 {
			return fmt.Errorf("%w: %s: wants a partition count", errBadMapping, tok)
		}
		if n, err := strconv.Atoi(args[0]); err != nil || n <= 0 {
			return fmt.Errorf("%w: %s: bad partition count", errBadMapping, tok)
		}
		for _, a := range args[1:] {
			if err := index(a); err != nil {
				return err
			}
		}
	case "random":
		if len(args) != 1 {
			return fmt.Errorf("%w: %s: wants one argument", errBadMapping, tok)
		}
	default: // split, left, right, slice and split variants: (index, arg)
		if len(args) != 2 {
			return fmt.Errorf("%w: %s: wants two arguments", errBadMapping, tok)
		}
		return index(args[0])
	}
	return nil
}
