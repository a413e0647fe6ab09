package main

import (
	"os/exec"
	"strings"
	"testing"
)

// testOnlyPackages are the module's helpers for tests (the test kit, and every package below
// it). They may import "testing", start servers or run loads, none of which belongs in the shipped
// binary. The tests' hooks (internal/testkit/faults) are among them: the product packages declare
// the hooks they read as interfaces with no-op defaults, and only tests set them.
var testOnlyPackages = []string{
	"github.com/enginemig/enginemig/internal/testkit/sandboxtest",
	"github.com/enginemig/enginemig/internal/testkit",
}

// TestBinaryLinksNoTestCode guards the binary against test code: one import of a test helper from
// a non-test file links package testing (and its flags) into every user's enginemig. It asks the
// go tool rather than reading imports itself, so it sees exactly what the linker gets.
func TestBinaryLinksNoTestCode(t *testing.T) {
	// go test puts GOROOT/bin first on PATH, so this is the go that is running the test.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list the binary's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if forbiddenDep(pkg) {
			t.Errorf("cmd/enginemig links %s, which is test-only code", pkg)
		}
	}
}

func forbiddenDep(pkg string) bool {
	if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
		return true
	}
	for _, p := range testOnlyPackages {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}
