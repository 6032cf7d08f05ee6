//go:build !linux

package dispatch_test

import "syscall"

// childAttrs is nil where the kernel cannot kill a child with its parent; the benchmark's
// cleanup still stops it.
func childAttrs() *syscall.SysProcAttr { return nil }

// stopSelf stops this process (SIGSTOP).
func stopSelf() { _ = syscall.Kill(syscall.Getpid(), syscall.SIGSTOP) }
