package testenv

import (
	"fmt"
	"os"
	"strings"
)

// writeVolcanoManifest writes a release-manifest look-alike: what ctr_cluster installs in tests.
// Unlike the real release it has no admission webhook configurations: those would point at
// Services whose pods kwok only simulates, and block every Job.
func writeVolcanoManifest(path string, crds []string) error {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: volcano-system\n")
	for _, f := range crds {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.WriteString(strings.TrimPrefix(string(data), "---\n"))
	}
	for _, c := range []string{"scheduler", "controllers", "admission"} {
		image := map[string]string{"scheduler": "vc-scheduler", "controllers": "vc-controller-manager", "admission": "vc-webhook-manager"}[c]
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: volcano-%[1]s
  namespace: volcano-system
  labels:
    app: volcano-%[1]s
spec:
  replicas: 1
  selector:
    matchLabels:
      app: volcano-%[1]s
  template:
    metadata:
      labels:
        app: volcano-%[1]s
    spec:
      containers:
      - name: volcano-%[1]s
        image: docker.io/volcanosh/%[2]s:%[3]s
`, c, image, VolcanoVersion)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
