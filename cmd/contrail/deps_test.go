package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportGraph holds the packages to the one-way import graph of
// docs/architecture.md: the server and JetStream meet only through the
// Account seam that cmd wires, the storage and wire-format packages stay
// free of the layers above them, and nothing imports cmd.
func TestImportGraph(t *testing.T) {
	const mod = "github.com/contrail/contrail/"
	forbidden := map[string][]string{
		"dataplane/server":        {"dataplane/jetstream", "dataplane/store", "dataplane/monitor", "cmd/"},
		"dataplane/jetstream":     {"dataplane/server", "dataplane/monitor", "cmd/"},
		"dataplane/store":         {"dataplane/jetstream", "dataplane/server", "dataplane/monitor", "dataplane/config", "cmd/"},
		"dataplane/jetstream/api": {"dataplane/jetstream", "dataplane/server", "dataplane/store", "cmd/"},
		"dataplane/protocol":      {"dataplane/"},
		// The backup format is records and checksums: nothing of ours.
		"dataplane/jetstream/archive": {"dataplane/", "cmd/", "controlplane", "tenant"},
		"dataplane/subject":           {"dataplane/server", "dataplane/jetstream", "dataplane/store", "dataplane/protocol", "cmd/"},
		"dataplane/config":            {"dataplane/server", "dataplane/jetstream", "dataplane/store", "cmd/"},
		"dataplane/monitor":           {"cmd/"},
		// The object stores and the segment format know nothing of streams.
		"dataplane/tier":     {"dataplane/server", "dataplane/jetstream", "dataplane/store", "dataplane/monitor", "dataplane/config", "cmd/", "controlplane", "tenant"},
		"dataplane/resolver": {"dataplane/server", "dataplane/jetstream", "dataplane/monitor", "cmd/", "controlplane", "tenant"},
		// The tenant model is what both planes share: it depends on neither.
		"tenant": {"dataplane/", "controlplane", "cmd/"},
		// The control plane shares only tenant with the data plane; its
		// storage knows nothing above it, and the API is the only package
		// that speaks HTTP.
		"controlplane":           {"dataplane/", "cmd/"},
		"controlplane/api":       {"dataplane/", "cmd/"},
		"controlplane/provision": {"dataplane/", "cmd/", "controlplane/api", "controlplane/auth"},
		"controlplane/records":   {"dataplane/", "cmd/", "controlplane/api", "controlplane/auth", "controlplane/provision"},
		"controlplane/auth":      {"dataplane/", "cmd/", "controlplane/api", "controlplane/records", "controlplane/provision", "controlplane/state"},
		"controlplane/state":     {"dataplane/", "cmd/", "controlplane/", "tenant"},
		"controlplane/usage":     {"dataplane/", "cmd/", "controlplane/api", "controlplane/auth"},
		// The console is static files: it imports nothing of ours.
		"web":     {"dataplane/", "cmd/", "controlplane", "tenant", "openapi"},
		"openapi": {"dataplane/", "cmd/", "controlplane", "tenant"},
		// The Terraform provider is a client of the REST contract only.
		"terraform/client":   {"dataplane/", "cmd/", "controlplane", "tenant", "openapi"},
		"terraform/provider": {"dataplane/", "cmd/", "controlplane", "tenant", "openapi"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			rel, ours := strings.CutPrefix(dep, mod)
			if !ours || rel == pkg {
				continue
			}
			for _, b := range bad {
				if strings.HasPrefix(rel, b) && !strings.HasPrefix(rel, pkg+"/") {
					t.Errorf("%s imports %s, which the import graph forbids", pkg, rel)
				}
			}
		}
	}
}
