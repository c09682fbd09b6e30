package localaws

import (
	"bufio"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rclone/gofakes3"
	"github.com/rclone/gofakes3/s3mem"
)

// S3ChildEnv makes a test binary (or a tool) serve S3 instead of running.
const S3ChildEnv = "S3SQS_SERVE_S3"

// ServeS3Child serves gofakes3 and returns true when this test binary was
// started by StartS3Child; call it first in TestMain and return if it
// says so. Benchmarks use the child so that the objects they read are not
// in their own memory when they measure it.
func ServeS3Child() bool {
	if os.Getenv(S3ChildEnv) == "" {
		return false
	}
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	fmt.Println(srv.URL)
	io.Copy(io.Discard, os.Stdin) // until the parent goes
	srv.Close()
	return true
}

// StartS3Child runs this test binary as an S3 server (see ServeS3Child) and
// returns its URL. The child ends with the test.
func StartS3Child(tb testing.TB) string {
	tb.Helper()
	child, err := RunS3Child()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(child.Stop)
	return child.URL
}

// S3Child is a copy of this program serving S3 (see ServeS3Child).
type S3Child struct {
	// URL is where it serves.
	URL string
	// PID is its process id.
	PID int
	// Stop ends it and waits for it.
	Stop func()
}

// RunS3Child runs this program as an S3 server (see ServeS3Child), for a
// tool whose main calls ServeS3Child first. Stop ends it.
func RunS3Child() (*S3Child, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), S3ChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		stdin.Close()
		cmd.Wait()
	}
	url, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("S3 child process: %w", err)
	}
	return &S3Child{URL: strings.TrimSpace(url), PID: cmd.Process.Pid, Stop: stop}, nil
}
