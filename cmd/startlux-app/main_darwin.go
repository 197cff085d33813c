package main

import "runtime"

// AppKit must run on the main thread: keep the main goroutine, which runs
// app.RunTray, on it. (An init function runs on the main thread.)
func init() { runtime.LockOSThread() }
