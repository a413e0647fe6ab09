package ansible

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/enginemig/enginemig/internal/db/outcome"
)

// The role classifies hosts by the binary's exit codes; its table of their names must be the
// outcome package's, code for code.
func TestExitNamesMatchOutcome(t *testing.T) {
	b, err := os.ReadFile("roles/enginemig/vars/main.yml")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?m)^enginemig_exit_names:\n((?:  \d+: \w+\n)+)`).FindSubmatch(b)
	if block == nil {
		t.Fatal("enginemig_exit_names not found in roles/enginemig/vars/main.yml")
	}
	got := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^  (\d+): (\w+)$`).FindAllSubmatch(block[1], -1) {
		code, _ := strconv.Atoi(string(m[1]))
		got[code] = string(m[2])
	}
	for code := outcome.OK; code <= outcome.CutoverPending; code++ {
		if got[int(code)] != code.Name() {
			t.Errorf("exit code %d: the role says %q, outcome says %q", code, got[int(code)], code.Name())
		}
	}
	if len(got) != int(outcome.CutoverPending)+1 {
		t.Errorf("the role names %d exit codes, outcome has %d", len(got), outcome.CutoverPending+1)
	}
}
