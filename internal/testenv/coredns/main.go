// Command coredns is CoreDNS built with only the plugins the local cluster's real node needs:
// bind, errors, log and kubernetes. It has no forward plugin, so names outside the cluster
// domain are refused: pods on the node never reach a resolver outside this machine.
//
// It lives in its own module so that CoreDNS's dependencies stay out of the provider's go.mod.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	// The order requests pass the plugins in (CoreDNS's plugin.cfg order, cut to these four).
	dnsserver.Directives = []string{"bind", "errors", "log", "kubernetes"}
}

func main() { coremain.Run() }
