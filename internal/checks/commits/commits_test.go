package commits

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the directory holding go.mod, found upwards from the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// hook runs scripts/commit-msg on msg and returns its output and whether it accepted msg.
func hook(t *testing.T, msg string) (string, bool) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "COMMIT_EDITMSG")
	require.NoError(t, os.WriteFile(f, []byte(msg), 0o600))
	out, err := exec.Command(filepath.Join(repoRoot(t), "scripts", "commit-msg"), f).CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "scripts/commit-msg did not run: %s", out)
		require.Equal(t, 1, exit.ExitCode(), "a refusal exits 1: %s", out)
	}
	return string(out), err == nil
}

func TestTheCommitMsgHookRefusesASubjectOver72Characters(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		ok        bool
	}{
		{"72 characters", strings.Repeat("a", 72) + "\n\nThe body.\n", true},
		{"73 characters", strings.Repeat("a", 73) + "\n\nThe body.\n", false},
		{"72 characters of two bytes each", strings.Repeat("é", 72) + "\n", true},
		{"73 characters of two bytes each", strings.Repeat("é", 73) + "\n", false},
		{"a subject alone, no newline", "Hold an account after consecutive refusals", true},
		{"a body right under the subject", "Hold an account\nafter consecutive refusals\n", false},
		{"git's comments and blank lines before the subject", "\n# Please enter the commit message\n" + strings.Repeat("a", 60) + "\n\n# " + strings.Repeat("b", 100) + "\n", true},
		{"a long line in the body", "Short subject\n\n" + strings.Repeat("b", 200) + "\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := hook(t, tc.msg)
			require.Equal(t, tc.ok, ok, out)
			if !ok {
				require.Contains(t, out, "CONTRIBUTING.md")
			}
		})
	}
}

// git runs git in dir with a fixed identity, failing the test on an error.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=atmost", "GIT_AUTHOR_EMAIL=atmost@example.invalid",
		"GIT_COMMITTER_NAME=atmost", "GIT_COMMITTER_EMAIL=atmost@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// A repository whose history before the base breaks the rule: check-commits leaves it alone,
// passes a good commit after it, and goes red on a long subject after it.
func TestCheckCommitsRefusesALongSubjectAfterTheBaseOnly(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH: the commit checks need it")
	}
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "scripts"), 0o755))
	for _, name := range []string{"commit-msg", "check-commits"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(repo, "scripts", name), b, 0o755))
	}
	git(t, repo, "init", "-q")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "An old subject from before the rule, "+strings.Repeat("far too long ", 10))
	base := git(t, repo, "rev-parse", "HEAD")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "scripts", "commit-base"), []byte("# the base\n"+base+"\n"), 0o644))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "Record where the subject rule starts", "-m", "The body says why.")

	check := func() (string, error) {
		cmd := exec.Command(filepath.Join(repo, "scripts", "check-commits"))
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := check()
	require.NoError(t, err, "only the commit after the base counts: %s", out)
	require.Contains(t, out, "1 commits after")

	long := "Describe the new state of the dispatcher at length, as subjects used to do here"
	require.Greater(t, len(long), 72)
	git(t, repo, "commit", "-q", "--allow-empty", "-m", long)
	out, err = check()
	require.Error(t, err, "a subject of %d characters after the base: %s", len(long), out)
	require.Contains(t, out, long)
	require.Contains(t, out, "1 of 2 commits")
}
