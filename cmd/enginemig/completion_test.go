package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

func TestCompletion(t *testing.T) {
	out, code := runCLI(t, "completion", "bash")
	if code != outcome.OK || !strings.Contains(out, "complete -o bashdefault") {
		t.Fatalf("bash: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, "completion", "zsh")
	if code != outcome.OK || !strings.Contains(out, "compdef _enginemig_zsh_autocomplete enginemig") {
		t.Fatalf("zsh: exit %d\n%s", code, out)
	}
	if _, code := runCLI(t, "completion", "fish"); code != outcome.Usage {
		t.Fatalf("fish: exit %d, want 2", code)
	}
	// What the scripts ask the binary for. urfave/cli reads os.Args for flag candidates, so this
	// runs the real binary rather than the app in-process.
	bin := filepath.Join(t.TempDir(), "enginemig")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	top, _ := exec.Command(bin, "--generate-bash-completion").Output()
	for _, want := range []string{"plan", "apply", "demo", "completion"} {
		if !strings.Contains(string(top), want+"\n") {
			t.Errorf("top-level candidates lack %q:\n%s", want, top)
		}
	}
	flags, _ := exec.Command(bin, "demo", "--ro", "--generate-bash-completion").Output()
	if !strings.Contains(string(flags), "--rows") {
		t.Errorf("demo flag candidates lack --rows:\n%s", flags)
	}
}
