// Package version reports which build of atmost is running.
package version

import (
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X github.com/atmost/atmost/internal/version.Version=v1.2.3");
// when it is not, String falls back to the VCS revision the Go toolchain stamped into the binary.
var Version = ""

// String returns the version, or "devel+<revision>[-dirty]" for an unreleased build, or
// "devel" when the binary carries no VCS information (go run, go test).
func String() string {
	if Version != "" {
		return Version
	}
	revision, modified := vcs()
	if revision == "" {
		return "devel"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if modified {
		revision += "-dirty"
	}
	return "devel+" + revision
}

// Revision is the VCS revision the Go toolchain stamped into the binary, with "-dirty" for
// uncommitted changes, or "" when it carries none (go run, go test).
func Revision() string {
	revision, modified := vcs()
	if revision != "" && modified {
		revision += "-dirty"
	}
	return revision
}

// vcs reads the revision the Go toolchain stamped into the binary, and whether the tree had
// uncommitted changes.
func vcs() (revision string, modified bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return revision, modified
}
