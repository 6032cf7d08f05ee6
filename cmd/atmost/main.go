// Command atmost is the operator command of atmost: it applies the ledger schema and reports
// its version. Run atmost help for the commands.
package main

import "github.com/atmost/atmost/pkg/command"

func main() { command.Main() }
