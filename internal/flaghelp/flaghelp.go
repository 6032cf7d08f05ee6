// Package flaghelp prints a standard flag set's flags the way atmost's help spells every flag:
// --name, as users type them and as every usage line and document writes them.
package flaghelp

import (
	"flag"
	"io"
	"regexp"
	"strings"
)

// flagLine is the start of a flag's line in the flag package's PrintDefaults.
var flagLine = regexp.MustCompile(`(?m)^  -([^-\s])`)

// PrintDefaults writes what fs.PrintDefaults writes, each flag as --name instead of -name, to w.
// fs's output is where it was after.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	out := fs.Output()
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	_, _ = io.WriteString(w, flagLine.ReplaceAllString(b.String(), "  --$1"))
}
