package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmeLines bounds the README: what atmost is and promises, the two commands, the data flow
// and where each reader goes next. Everything longer belongs in docs/, where its reader looks.
const readmeLines = 250

func TestTheReadmeStaysShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	lines := strings.Count(strings.TrimSuffix(string(b), "\n"), "\n") + 1
	require.LessOrEqual(t, lines, readmeLines, "README.md has %d lines; move the detail into docs/", lines)
}
