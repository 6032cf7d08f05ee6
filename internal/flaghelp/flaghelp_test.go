package flaghelp_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/flaghelp"
)

func TestPrintDefaultsSpellsEveryFlagWithTwoDashes(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var stderr bytes.Buffer
	fs.SetOutput(&stderr)
	fs.String("addr", "127.0.0.1:9300", "address to serve on, e.g. -addr :0")
	fs.Bool("dedupe", false, "answer a repeated key")
	fs.Duration("latency", 0, "added to every create")
	var out bytes.Buffer
	flaghelp.PrintDefaults(&out, fs)
	require.Equal(t, "  --addr string\n    \taddress to serve on, e.g. -addr :0 (default \"127.0.0.1:9300\")\n"+
		"  --dedupe\n    \tanswer a repeated key\n  --latency duration\n    \tadded to every create\n", out.String())
	require.Empty(t, stderr.String())
	require.Equal(t, &stderr, fs.Output(), "the flag set's output is restored")
}
