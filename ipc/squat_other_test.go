//go:build !linux

package ipc

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal;
// the test's cleanup stops the squatter.
func dieWithParent(*syscall.SysProcAttr) {}
