// Package rie runs a built Lambda bootstrap under aws-lambda-rie, the
// Lambda Runtime Interface Emulator, so that end-to-end tests go through
// the real Lambda runtime API. The emulator is found through
// localaws.EnvRIE, which `make test` sets.
package rie

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3sqs/s3sqs/internal/localaws"
)

// Build compiles the Lambda function in the package at pkg (such as
// "./functions/fanout", relative to the module root) into a bootstrap for
// this machine, as `make build` does for Lambda but for the host's
// architecture, and returns its path.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(b))), nil
}

// Runtime is a bootstrap running under aws-lambda-rie. The emulator runs
// one invocation at a time; Invoke serialises calls.
type Runtime struct {
	url string
	mu  sync.Mutex
	out *lockedWriter
	// Init is how long the first invocation took, which includes the
	// function's initialisation (its cold start).
	Init time.Duration
}

// Start runs bootstrap under aws-lambda-rie with the environment env (on
// top of this process's) and stops it when the test ends. The function's
// output is in Logs.
func Start(tb testing.TB, bootstrap string, env ...string) *Runtime {
	tb.Helper()
	bin := localaws.Endpoint(tb, localaws.EnvRIE)
	addr, api := freeAddr(tb), freeAddr(tb)
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", addr, "--runtime-api-address", api, bootstrap)
	cmd.Env = append(os.Environ(), env...)
	w := &lockedWriter{w: &bytes.Buffer{}}
	r := &Runtime{url: "http://" + addr + "/2015-03-31/functions/function/invocations", out: w}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start aws-lambda-rie: %v", err)
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if tb.Failed() {
			tb.Logf("function output:\n%s", w.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("aws-lambda-rie did not listen on %s: %v\n%s", addr, err, w.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// Invoke sends payload as an invocation and returns the function's answer.
// A handler error comes back from the emulator as a 200 with errorMessage
// in the body; Invoke returns it as an *Error.
func (r *Runtime) Invoke(ctx context.Context, payload any) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	if raw, ok := payload.(json.RawMessage); ok {
		body = raw
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

// Logs returns what the function and the emulator have written so far.
func (r *Runtime) Logs() string { return r.out.String() }

// Error is a function error as the Lambda runtime API reports it.
type Error struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

func (e *Error) Error() string { return "function error: " + e.Type + ": " + e.Message }

func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
