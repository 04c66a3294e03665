// Command contrail runs Contrail: a data-plane node, the control plane, or
// both together for local development.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: contrail <command> [flags]

commands:
  dev           run the whole product on this machine: control plane, resolver and one node
  controlplane  run the control plane (REST API, account resolver, provisioning)
  dataplane     run a data-plane node (NATS protocol and JetStream)
  version       print the version

Run 'contrail <command> -h' for a command's flags.
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "dataplane":
		return runDataplane(args[1:], stdout, stderr)
	case "controlplane":
		return runControlplane(args[1:], stdout, stderr)
	case "dev":
		return runDev(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintf(stdout, "contrail %s (nats protocol %s)\n", version, serverVersion())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "contrail: unknown command %q\n\n%s", args[0], usage)
	return 2
}
