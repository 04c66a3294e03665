package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A clustered cell lists its nodes in nats_url (comma-separated) or
// nats_urls; a bad or repeated URL is an error naming the cell.
func TestReadCellsURLs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ yaml, want, err string }{
		{"cells:\n  - name: a\n    nats_url: nats://h1:4222, nats://h2:4222\n", "nats://h1:4222,nats://h2:4222", ""},
		{"cells:\n  - name: a\n    nats_urls: [nats://h1:1, tls://h2:2]\n", "nats://h1:1,tls://h2:2", ""},
		{"cells:\n  - name: a\n    nats_url: nats://h1:1\n    nats_urls: [nats://h2:2]\n", "nats://h1:1,nats://h2:2", ""},
		{"cells:\n  - name: a\n    nats_urls: [nats://h1:1, nats://h1:1]\n", "", "listed twice"},
		{"cells:\n  - name: a\n    nats_urls: [http://h1:1]\n", "", "cells[0]"},
		{"cells:\n  - name: a\n    nats_urls: [nats://h1]\n", "", "want nats://host:port"},
		{"cells:\n  - name: a\n    nats_urls: []\n", "", "nats_url (or nats_urls) is required"},
		{"cells:\n  - name: a\n    nats_urls: nats://h1:1\n", "", "cannot unmarshal"},
	} {
		path := filepath.Join(dir, "cells.yaml")
		writeFile(t, dir, "cells.yaml", c.yaml)
		cells, err := readCells(path)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one saying %q", c.yaml, err, c.err)
		case c.err == "" && (err != nil || cells[0].NatsURL != c.want):
			t.Errorf("%q: %+v %v, want %q", c.yaml, cells, err, c.want)
		}
	}
}
