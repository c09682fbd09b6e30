// Package rie runs a built Lambda bootstrap under aws-lambda-rie, the
// Lambda Runtime Interface Emulator, so that end-to-end tests and the local
// demo go through the real Lambda runtime API. Tests find the emulator
// through localaws.EnvRIE, which `make test` sets.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/testenv/localaws"
)

// Build compiles the Lambda function in the package at pkg (such as
// "./functions/fanout", relative to the module root) into a bootstrap for
// this machine, as `make build` does for Lambda but for the host's
// architecture, and returns its path.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	out, err := BuildBootstrap(tb.TempDir(), pkg)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BuildBootstrap compiles the function in pkg into dir/bootstrap.
func BuildBootstrap(dir, pkg string) (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	out := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(b)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// Runtime is a bootstrap running under aws-lambda-rie. The emulator runs
// one invocation at a time; Invoke serialises calls.
type Runtime struct {
	url string
	cmd *exec.Cmd
	mu  sync.Mutex
	out *lockedWriter
	// Init is how long the first invocation took, which includes the
	// function's initialisation (its cold start).
	Init time.Duration
}

// Start runs bootstrap under aws-lambda-rie with the environment env (on
// top of this process's) and stops it when the test ends, showing its
// output if the test failed.
func Start(tb testing.TB, bootstrap string, env ...string) *Runtime {
	tb.Helper()
	r, err := Run(localaws.Endpoint(tb, localaws.EnvRIE), bootstrap, env, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		r.Close()
		if tb.Failed() {
			tb.Logf("function output:\n%s", r.Logs())
		}
	})
	return r
}

// Run starts the emulator bin around bootstrap on free 127.0.0.1 ports
// (for invocations and for the runtime API, so that several can run at
// once), with env on top of this process's environment. The function's
// output is kept for Logs and also copied to tee, if not nil. Close stops
// it.
func Run(bin, bootstrap string, env []string, tee io.Writer) (*Runtime, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--runtime-interface-emulator-address", addr, "--runtime-api-address", api, bootstrap)
	cmd.Env = append(os.Environ(), env...)
	w := &lockedWriter{w: &bytes.Buffer{}, tee: tee}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start aws-lambda-rie: %w", err)
	}
	r := &Runtime{url: "http://" + addr + "/2015-03-31/functions/function/invocations", cmd: cmd, out: w}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return r, nil
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("aws-lambda-rie did not listen on %s: %v\n%s", addr, err, w.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the emulator and the function.
func (r *Runtime) Close() {
	r.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
}

// Invoke sends payload (marshalled to JSON unless it is a json.RawMessage)
// as an invocation and returns the function's answer. A handler error comes
// back from the emulator as a 200 with errorMessage in the body; Invoke
// returns it as an *Error, with the body.
func (r *Runtime) Invoke(ctx context.Context, payload any) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	body, ok := payload.(json.RawMessage)
	if !ok {
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if r.Init == 0 {
		r.Init = time.Since(start)
	}
	if err != nil {
		return nil, fmt.Errorf("invoke: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("invoke: HTTP %d: %s", resp.StatusCode, out)
	}
	var fe Error
	if json.Unmarshal(out, &fe) == nil && fe.Message != "" {
		return out, &fe
	}
	return out, nil
}

// PID returns the process id of the emulator; the function runs as its
// child (see FunctionPID).
func (r *Runtime) PID() int { return r.cmd.Process.Pid }

// FunctionPID returns the process id of the function (the bootstrap the
// emulator started), which exists once the first invocation has begun.
func (r *Runtime) FunctionPID() (int, error) {
	kids, err := Children(r.PID())
	if err != nil {
		return 0, err
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("aws-lambda-rie (pid %d) has %d child processes, want the function alone", r.PID(), len(kids))
	}
	return kids[0], nil
}

// Children returns the processes whose parent is pid, from /proc.
func Children(pid int) ([]int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, ok := parentOf(b); ok && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids, nil
}

// parentOf reads the parent's pid from a /proc/<pid>/stat line: the
// second field after the command name, which is in parentheses and may
// hold spaces and parentheses itself.
func parentOf(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// Logs returns what the function and the emulator have written so far.
func (r *Runtime) Logs() string { return r.out.String() }

// WaitLogs reports whether the function's output contains want within
// timeout. The output comes through a pipe, and may arrive after the
// invocation's answer, more so on a busy machine.
func (r *Runtime) WaitLogs(want string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(r.out.String(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// Error is a function error as the Lambda runtime API reports it.
type Error struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

func (e *Error) Error() string { return "function error: " + e.Type + ": " + e.Message }

// IsFunctionError reports whether err is a function error (the handler
// returned an error, crashed or timed out) rather than a failure to invoke.
func IsFunctionError(err error) bool {
	var fe *Error
	return errors.As(err, &fe)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type lockedWriter struct {
	mu  sync.Mutex
	w   *bytes.Buffer
	tee io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tee != nil {
		l.tee.Write(p)
	}
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
