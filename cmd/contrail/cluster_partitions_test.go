package main

import (
	"strings"
	"testing"

	"github.com/contrail/contrail/dataplane/cluster"
	"github.com/contrail/contrail/dataplane/store"
)

// A store made by a cluster with more partitions than this node runs is
// refused before any group starts, with what to do; one with state only
// in this node's groups is not.
func TestCheckPartitions(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SetRepair(cluster.DefaultPartitions); err != nil {
		t.Fatal(err)
	}
	if err := checkPartitions(st); err != nil {
		t.Fatalf("state in the last partition refused: %v", err)
	}
	if err := st.SetRepair(cluster.DefaultPartitions + 1); err != nil {
		t.Fatal(err)
	}
	if err := checkPartitions(st); err == nil || !strings.Contains(err.Error(), "created with more") {
		t.Fatalf("state past the last partition: %v", err)
	}
}
