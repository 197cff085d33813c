package app

import "github.com/startlux/startlux/ipc"

// ModelsDir returns the folder the daemon looks for checkpoints in
// ([ipc.ModelsDir]).
func ModelsDir() (string, error) { return ipc.ModelsDir() }
