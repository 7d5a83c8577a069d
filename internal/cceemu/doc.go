// Package cceemu is a local emulator of Baidu Cloud's CCE v2 HTTP API, faithful enough for bce-sdk-go to talk to it.
//
// It serves the endpoints under /api/cce/service/v2 that the ctr provider uses (clusters, instance groups,
// kubeconfig, cluster event steps), verifies the bce-auth-v1 signature the way the service does, walks clusters
// and instance groups through their phases over time, and lets tests inject faults (create_failed with event-step
// reasons, 5xx and throttling, slow phases, out-of-band deletes and drift).
//
// Everything the emulator knows about the wire format was read from bce-sdk-go v0.9.277 (services/cce/v2,
// auth/signer.go, bce/). Where the service's behaviour cannot be read from the SDK (error codes for some
// failures, event step names and statuses) the emulator guesses; every guess is marked "Guess:" in a comment
// next to it so that it can be corrected when the real service says otherwise.
package cceemu
