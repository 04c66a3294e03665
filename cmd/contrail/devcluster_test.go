package main

import (
	"reflect"
	"testing"
)

// TestDevNodeAddrs: one address spreads over the nodes' ports, a list
// is taken as given, and a wrong count is refused.
func TestDevNodeAddrs(t *testing.T) {
	got, err := devNodeAddrs("nats-addr", "127.0.0.1:4222", 3)
	if err != nil || !reflect.DeepEqual(got, []string{"127.0.0.1:4222", "127.0.0.1:4223", "127.0.0.1:4224"}) {
		t.Fatalf("one address: %v, %v", got, err)
	}
	got, err = devNodeAddrs("nats-addr", "127.0.0.1:1,127.0.0.1:7,127.0.0.1:3", 3)
	if err != nil || !reflect.DeepEqual(got, []string{"127.0.0.1:1", "127.0.0.1:7", "127.0.0.1:3"}) {
		t.Fatalf("a list: %v, %v", got, err)
	}
	if got, err = devNodeAddrs("monitor-addr", "", 3); err != nil || len(got) != 3 || got[0] != "" {
		t.Fatalf("disabled: %v, %v", got, err)
	}
	if got, err = devNodeAddrs("nats-addr", "127.0.0.1:0", 3); err != nil || got[0] == got[1] || got[0] == "127.0.0.1:0" {
		t.Fatalf("free ports: %v, %v", got, err)
	}
	if _, err := devNodeAddrs("nats-addr", "127.0.0.1:1,127.0.0.1:2", 3); err == nil {
		t.Fatal("two addresses for three nodes accepted")
	}
	if _, err := devNodeAddrs("nats-addr", "127.0.0.1:65535", 3); err == nil {
		t.Fatal("ports beyond 65535 accepted")
	}
}
