// Command adapter is atmost with one more platform adapter, written outside atmost's tree: the
// way a program built on atmost adds the platforms it posts to. It registers the adapter of
// package notes under the platform name "notes" and runs atmost's command, so this binary is
// atmost (every role, `accounts add --platform notes`, the console) with that platform too:
//
//	go build -o bin/atmost-notes ./examples/adapter
//	bin/atmost-notes accounts add acct-n --platform notes --settings '{"url": "http://127.0.0.1:9300"}' --reason "notes"
//	bin/atmost-notes dispatch
//
// The adapter must pass atmost's conformance suite (pkg/platform/platformtest): notes_test.go
// runs it.
package main

import (
	"github.com/atmost/atmost/examples/adapter/notes"
	"github.com/atmost/atmost/pkg/command"
	"github.com/atmost/atmost/pkg/platform"
)

func main() {
	platform.Register(notes.Name, notes.Open)
	command.Main()
}
