// Command terraform-provider-ctr serves the ctr Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	buildversion "github.com/elasticctr/terraform-provider-ctr/internal/version"
	"github.com/elasticctr/terraform-provider-ctr/provider"
)

// version is set by the release build and `make build` (-ldflags "-X main.version=...");
// without it, internal/version reads the version Go recorded (see version.Of).
var version string

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider with support for debuggers like delve")
	flag.Parse()

	err := providerserver.Serve(context.Background(), provider.New(buildversion.Current(version)), providerserver.ServeOpts{
		Address: "registry.terraform.io/elasticctr/ctr",
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
