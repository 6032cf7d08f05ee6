package transport

import "strings"

// Table renders the error -> outcome table (Outcomes, in Cases order) as the markdown
// docs/design.md#what-a-sends-ending-proves carries between the lines
// <!-- transport-table:start --> and <!-- transport-table:end -->; a test keeps the two
// identical.
func Table() string {
	var b strings.Builder
	b.WriteString("| case | outcome | reason |\n|---|---|---|\n")
	for _, c := range cases {
		v := outcomes[c]
		reason := "none"
		if v.Reason != "" {
			reason = "`" + string(v.Reason) + "`"
		}
		b.WriteString("| " + string(c) + " | `" + string(v.Result) + "` | " + reason + " |\n")
	}
	return b.String()
}
