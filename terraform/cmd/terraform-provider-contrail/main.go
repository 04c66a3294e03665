// Command terraform-provider-contrail is Contrail's Terraform provider.
// Terraform starts it; run it with -debug to attach Terraform to it
// (TF_REATTACH_PROVIDERS) while developing.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/contrail/contrail/terraform/provider"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "serve for a debugger: print TF_REATTACH_PROVIDERS to attach Terraform")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/contrail/contrail",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
