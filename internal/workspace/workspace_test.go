package workspace

import (
	"bufio"
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// SeparateEnv, when set, says the caller tests every module itself (as
// .ci/run does, in one `go test ./... ./examples/fullstack/...`), so
// TestWorkspaceModules does not run them a second time.
const SeparateEnv = "SECKILL_MODULES_SEPARATE"

// modules lists the `use` directories of go.work other than the root.
func modules(t *testing.T, root string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatalf("go.work: %v", err)
	}
	var out []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "use (":
			in = true
		case in && line == ")":
			in = false
		case in && line != "" && line != ".":
			out = append(out, line)
		case strings.HasPrefix(line, "use ") && !strings.HasSuffix(line, "("):
			if d := strings.TrimSpace(strings.TrimPrefix(line, "use ")); d != "." {
				out = append(out, d)
			}
		}
	}
	return out
}

// TestWorkspaceModules runs `go test ./...` in each other module of the
// workspace with this run's settings (-race, -v, -short, -count, the
// remaining -timeout and the environment, so the real-server variables
// reach them), and fails with the tail of a module's output when it fails.
func TestWorkspaceModules(t *testing.T) {
	if os.Getenv(SeparateEnv) != "" {
		t.Skipf("%s is set: the caller tests every module itself", SeparateEnv)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := []string{"test"}
	if raceEnabled {
		args = append(args, "-race")
	}
	if testing.Verbose() {
		args = append(args, "-v")
	}
	if testing.Short() {
		args = append(args, "-short")
	}
	if f := flag.Lookup("test.count"); f != nil && f.Value.String() != "1" {
		args = append(args, "-count="+f.Value.String())
	} else if f != nil {
		args = append(args, "-count=1")
	}
	if d, ok := t.Deadline(); ok {
		left := time.Until(d) - 30*time.Second
		if left < time.Minute {
			t.Fatalf("%v left of the -timeout: not enough to test the other modules", time.Until(d))
		}
		args = append(args, "-timeout="+left.Round(time.Second).String())
	}
	args = append(args, "./...")
	for _, m := range modules(t, root) {
		t.Run(m, func(t *testing.T) {
			cmd := exec.Command(goBin, args...)
			cmd.Dir = filepath.Join(root, m)
			out, err := cmd.CombinedOutput()
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") {
					t.Log(line)
				}
			}
			if err != nil {
				tail := out
				if len(tail) > 20000 {
					tail = tail[len(tail)-20000:]
				}
				t.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), m, err, tail)
			}
		})
	}
}
