// Command pause is the real node's sandbox ("pause") container: it holds a pod's namespaces
// open, reaps the zombies of processes that share its PID namespace, and exits on SIGINT or
// SIGTERM. No registry is reachable from this machine, so testenv builds it into an image and
// imports it under the name containerd's sandbox_image setting names.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
