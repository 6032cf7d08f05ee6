package dispatch_test

import (
	"runtime"
	"syscall"
)

// childAttrs makes the kernel kill the benchmark's dispatcher process when the benchmark's
// process dies without its cleanups (go test's time limit, a kill): the child would otherwise
// run on, holding connections to the test database.
func childAttrs() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// stopSelf stops this process (SIGSTOP) from the calling thread, before the goroutine at the
// crash point takes another step. A SIGSTOP sent to the process (kill) is taken by whichever
// thread the kernel picks, and until that thread runs the caller carries on: under load a
// zombie "stopped after Authorize" had already been witnessed and sent. Sent to the calling
// thread itself (tgkill), the stop is taken on the way back from the system call.
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
