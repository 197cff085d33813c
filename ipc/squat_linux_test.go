package ipc

import "syscall"

// dieWithParent has the kernel kill the squatter when the test process
// dies, so that no listener outlives a crashed test.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
