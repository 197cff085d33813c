//go:build !unix

package hub

// freeSpace is unknown off Unix: the check is skipped.
func freeSpace(dir string) (int64, error) { return -1, nil }

// lockDir is a no-op off Unix.
func lockDir(dir string) (unlock func(), err error) { return func() {}, nil }
