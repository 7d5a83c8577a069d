package pipeline

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is one process, restartable with the same arguments and port.
type Proc struct {
	Name string
	Addr string
	bin  string
	args []string
	log  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start (re)starts the process and waits until its /healthz answers.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }() // a killed process's exit status is expected
	p.cmd, p.done = cmd, done
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + p.Addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start; see %s", p.Name, p.log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer /healthz within 20s; see %s", p.Name, p.log)
		}
	}
}

// LogFile is where the process's stdout and stderr go (appended across
// restarts).
func (p *Proc) LogFile() string { return p.log }

// PID is the running process's id, 0 when it is not running.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// Kill sends SIGKILL to the process (by PID) and waits for it.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

// Stop sends SIGTERM (by PID), then SIGKILL after 5 s.
func (p *Proc) Stop() {
	p.Resume()
	p.signal(syscall.SIGTERM)
}

// Pause stops the process with SIGSTOP: it keeps its port but never
// answers (a hung replica).
func (p *Proc) Pause() { p.send(syscall.SIGSTOP) }

// Resume undoes Pause.
func (p *Proc) Resume() { p.send(syscall.SIGCONT) }

func (p *Proc) send(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// SetArgs replaces the process's arguments (before the next Start).
func (p *Proc) SetArgs(f func([]string) []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.args = f(p.args)
}

func (p *Proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
