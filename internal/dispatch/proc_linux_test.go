package dispatch_test

import "syscall"

// childAttrs makes the kernel kill the benchmark's dispatcher process when the benchmark's
// process dies without its cleanups (go test's time limit, a kill): the child would otherwise
// run on, holding connections to the test database.
func childAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
