package image_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfileMatches keeps the top-level Dockerfile, which no test here can
// build (no daemon), in step with the image Build assembles: same user,
// entrypoint, command, working dir, environment, ports, label keys and
// /etc files.
func TestDockerfileMatches(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// One instruction per entry, continuation lines joined, comments dropped.
	var final []string // instructions of the last stage
	var goBuild string // the RUN that compiles cube
	joined := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "FROM "):
			final = []string{line}
		default:
			final = append(final, line)
			if strings.Contains(line, "go build") {
				goBuild = line
			}
		}
	}
	if len(final) == 0 || final[0] != "FROM scratch" {
		t.Fatalf("last stage starts %q, want FROM scratch", final)
	}
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`, "./cube/cmd/cube"} {
		if !strings.Contains(goBuild, flag) {
			t.Errorf("the build stage's go build lacks %s: %q", flag, goBuild)
		}
	}
	instr := func(name string) []string {
		var args []string
		for _, l := range final {
			if strings.HasPrefix(l, name+" ") {
				args = append(args, strings.TrimSpace(strings.TrimPrefix(l, name+" ")))
			}
		}
		return args
	}
	exec := func(name string) []string {
		var v []string
		if a := instr(name); len(a) != 1 || json.Unmarshal([]byte(a[0]), &v) != nil {
			t.Errorf("%s %q is not one JSON array", name, a)
		}
		return v
	}

	img := build(t, options(t))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if got := exec("ENTRYPOINT"); !reflect.DeepEqual(got, c.Entrypoint) {
		t.Errorf("ENTRYPOINT %q, image %q", got, c.Entrypoint)
	}
	if got := exec("CMD"); !reflect.DeepEqual(got, c.Cmd) {
		t.Errorf("CMD %q, image %q", got, c.Cmd)
	}
	for name, want := range map[string]string{"USER": c.User, "WORKDIR": c.WorkingDir, "ENV": strings.Join(c.Env, " ")} {
		if got := instr(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s %q, image %q", name, got, want)
		}
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	if got := strings.Join(instr("EXPOSE"), " "); !sameWords(got, ports) {
		t.Errorf("EXPOSE %q, image %q", got, ports)
	}
	labels := regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)="([^"]*)"`).FindAllStringSubmatch(strings.Join(instr("LABEL"), " "), -1)
	got := map[string]string{}
	for _, m := range labels {
		got[m[1]] = m[2]
	}
	for k, v := range c.Labels {
		g, ok := got[k]
		if !ok {
			t.Errorf("LABEL lacks %s", k)
		} else if !strings.HasPrefix(g, "${") && g != v {
			t.Errorf("LABEL %s=%q, image %q", k, g, v)
		}
	}
	if len(got) != len(c.Labels) {
		t.Errorf("LABEL has %d keys, image %d", len(got), len(c.Labels))
	}

	for _, f := range []string{"etc/passwd", "etc/group"} {
		want := strings.ReplaceAll(string(fileBody(t, img, f)), "\n", `\n`)
		if !strings.Contains(joined, "printf '"+want+"' > /out/root/"+f) {
			t.Errorf("the Dockerfile does not write /%s as the image has it: printf '%s'", f, want)
		}
	}
}

func sameWords(s string, want []string) bool {
	got := strings.Fields(s)
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, w := range want {
		seen[w] = true
	}
	for _, g := range got {
		if !seen[g] {
			return false
		}
	}
	return true
}
